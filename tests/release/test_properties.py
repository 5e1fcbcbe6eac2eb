"""A property of the release readers and the evaluator, over small RMB-layout releases that hypothesis
writes (valid ones, and ones with one hostile change): a release the reader accepts evaluates, under
``baseline:length``, to figures equal to a plain re-count from its files; a release it refuses is
refused with one line (an ``RMBError``) that names the file or link at fault."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmb_build.benchmarks.formats import open_release
from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import load_rm
from rmb_build.evaluate.run import evaluate

SCENARIOS = ("Helpfulness/Chat/Discussion", "Helpfulness/Code/Documentation", "Harmlessness/S1", "Harmlessness/S6")
FOLDERS = {"pairwise": "Pairwise_set", "bon": "BoN_set"}
TEXT = st.text(alphabet="ab é😀\n", max_size=6)

# the hostile changes; the first ones leave a release the reader must accept
ACCEPTED = ("none", "linked_folder", "linked_file", "stray_text_file", "hidden_file")
REFUSED = (
    "link_loop",
    "broken_link",
    "missing_field",
    "mistyped_uid",
    "truncated",
    "not_a_list",
    "unknown_scenario",
    "unknown_set_folder",
)


@st.composite
def items(draw, set_name: str) -> list[dict]:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        turns = draw(st.sampled_from([1, 3]))
        conv = [{"content": draw(TEXT), "role": "user" if i % 2 == 0 else "assistant"} for i in range(turns)]
        uid = str(draw(st.integers(0, 6)))  # small: uids collide now and then, which the reader accepts
        if set_name == "pairwise":
            item = {
                "pair_uid": uid,
                "conversation_input": conv,
                "chosen": {"llm_name": "m1", "answer": draw(TEXT)},
                "reject": {"llm_name": "m2", "answer": draw(TEXT)},
            }
        else:
            losers = draw(st.lists(TEXT, min_size=2, max_size=3))
            item = {
                "conversation_input": conv,
                "bon_best": {"llm_name": "m1", "answer": draw(TEXT)},
                "loser_list": [{"llm_name": f"m{k + 2}", "answer": a} for k, a in enumerate(losers)],
                "bon_uid": uid,
            }
        out.append(item)
    return out


@st.composite
def releases(draw) -> tuple[dict[str, list[dict]], int]:
    """(files: relative path -> items, a number choosing where a hostile change goes)."""
    files = {}
    for set_name, folder in FOLDERS.items():
        for scenario in draw(st.lists(st.sampled_from(SCENARIOS), min_size=0, max_size=3, unique=True)):
            files[f"{folder}/{scenario}.json"] = draw(items(set_name))
    if not files:
        files["Pairwise_set/Harmlessness/S1.json"] = draw(items("pairwise"))
    return files, draw(st.integers(0, 1000))


def write(root: Path, files: dict[str, list[dict]], change: str, pick: int) -> str | None:
    """Write the release under ``root`` with ``change`` applied; the relative path the change touched."""
    for rel, its in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(its, indent=1, ensure_ascii=False), encoding="utf-8")
    rel = sorted(files)[pick % len(files)]
    path = root / rel
    with_items = [r for r in sorted(files) if files[r]]
    if change == "linked_folder":  # the file's folder moved out of the release and linked back
        store = root.parent / "store"
        path.parent.rename(store)
        path.parent.symlink_to(store, target_is_directory=True)
        return path.parent.relative_to(root).as_posix()
    elif change == "linked_file":
        store = root.parent / "store.json"
        path.rename(store)
        path.symlink_to(store)
    elif change == "stray_text_file":
        (path.parent / "notes.txt").write_text("not a set file")
    elif change == "hidden_file":
        (path.parent / ".hidden.json").write_text("{ not JSON")
    elif change == "link_loop":
        (path.parent / "again").symlink_to("..", target_is_directory=True)
        return f"{path.parent.relative_to(root)}/again"
    elif change == "broken_link":
        (path.parent / "gone.json").symlink_to("nowhere/gone.json")
        return f"{path.parent.relative_to(root)}/gone.json"
    elif change in ("missing_field", "mistyped_uid"):
        if not with_items:
            return None  # nothing to break: the release stays valid
        rel = with_items[pick % len(with_items)]
        its = files[rel]
        item = its[pick % len(its)]
        key = "pair_uid" if "pair_uid" in item else "bon_uid"
        if change == "missing_field":
            del item[sorted(item)[pick % len(item)]]
        else:
            item[key] = [item[key]]
        (root / rel).write_text(json.dumps(its, indent=1), encoding="utf-8")
    elif change == "truncated":
        text = path.read_text(encoding="utf-8")
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    elif change == "not_a_list":
        path.write_text('{"items": []}', encoding="utf-8")
    elif change == "unknown_scenario":
        rel = rel.split("/")[0] + "/Helpfulness/Chat/Gossip.json"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("[]", encoding="utf-8")
    elif change == "unknown_set_folder":
        rel = "Extra_set"
        (root / rel / "Harmlessness").mkdir(parents=True)
        (root / rel / "Harmlessness/S1.json").write_text("[]", encoding="utf-8")
    return rel


def recount(root: Path) -> dict[str, dict[str, list[int]]]:
    """Per set and scenario, each item's outcome under answer length, straight from the files: every
    .json file not hidden under the set folders, symbolic links followed."""
    out: dict[str, dict[str, list[int]]] = {"pairwise": {}, "bon": {}}
    for set_name, folder in FOLDERS.items():
        for where, dirs, names in os.walk(root / folder, followlinks=True):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                path = Path(where) / name
                scenario = path.relative_to(root / folder).as_posix().removesuffix(".json")
                for it in json.loads(path.read_text(encoding="utf-8")):
                    if set_name == "pairwise":
                        won = len(it["chosen"]["answer"]) > len(it["reject"]["answer"])
                    else:
                        won = all(len(it["bon_best"]["answer"]) > len(x["answer"]) for x in it["loser_list"])
                    out[set_name].setdefault(scenario, []).append(int(won))
    return out


@pytest.mark.parametrize("change", ACCEPTED + REFUSED)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(release=releases())
def test_accepted_releases_evaluate_to_a_plain_recount_and_refused_ones_in_one_line(change, release):
    files, pick = release
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rel"
        touched = write(root, files, change, pick)
        try:
            opened = open_release(root)
        except RMBError as exc:
            message = str(exc)
            assert change in REFUSED, f"{change}: refused: {message}"
            assert "\n" not in message and touched is not None and touched in message, message
            return
        assert change in ACCEPTED or touched is None, f"{change} at {touched} was accepted"
        results = evaluate(
            opened, load_rm("baseline:length"), Path(tmp) / "out", Path(tmp) / "cache", resamples=5, progress=False
        )
        expected = recount(root)
        for set_name, scenarios in expected.items():
            got = results[set_name]
            nonempty = {sc: o for sc, o in scenarios.items() if o}
            assert set(got.get("scenarios", {})) == set(nonempty)
            for sc, outcomes in nonempty.items():
                assert got["scenarios"][sc]["n"] == len(outcomes)
                assert got["scenarios"][sc]["accuracy"] == pytest.approx(sum(outcomes) / len(outcomes))
            every = [o for outcomes in nonempty.values() for o in outcomes]
            if every:
                assert got["overall"]["n"] == len(every)
                assert got["overall"]["micro"] == pytest.approx(sum(every) / len(every))
                macro = sum(sum(o) / len(o) for o in nonempty.values()) / len(nonempty)
                assert got["overall"]["macro"] == pytest.approx(macro)
        read = results["release_read"]
        assert read["items"] == sum(len(v) for s in expected.values() for v in s.values())
        linked = {"linked_folder": sum(r.startswith(f"{touched}/") for r in files), "linked_file": 1}.get(change, 0)
        assert read["linked"] == linked
        skipped = {"stray_text_file": "not a .json file", "hidden_file": "hidden"}.get(change)
        assert [s["why"] for s in read["skipped"]] == ([skipped] if skipped else [])
    shutil.rmtree(Path(tmp), ignore_errors=True)
