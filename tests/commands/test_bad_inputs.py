"""The malformed-input corpus in tests/commands/bad_inputs/: exact inputs fail with one clear error naming the
file, the item and the field; nothing else is raised."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmb_build.core.errors import ConfigError, InputError
from rmb_build.pipeline.config import load_config
from rmb_build.release import read_release

CORPUS = Path(__file__).parent / "bad_inputs"

# file -> (where it is placed in a release, what the error must name)
RELEASE_CASES = {
    "invalid_json.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "line 11: invalid JSON: Expecting ':' delimiter",
    ),
    "truncated_json.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "truncated JSON"),
    "invalid_utf8.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "line 6: invalid UTF-8"),
    "missing_answer.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "item 1 (uid 2): field 'chosen.answer': missing",
    ),
    "missing_reject.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "item 0 (uid 1): field 'reject': missing"),
    "mistyped_uid.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'pair_uid': expected a string or integer uid, got list",
    ),
    "empty_conversation.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input': empty conversation",
    ),
    "ends_with_assistant.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "ends with a 'assistant' turn"),
    "non_string_content.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input[0].content': expected a string, got dict",
    ),
    "unknown_role.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input[0].role': unknown role 'bot'",
    ),
    "language_not_string.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input[0].language'",
    ),
    "not_a_list.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "expected a JSON list of items, got dict"),
    "item_not_object.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "item 1: expected an object, got str"),
    "answer_not_object.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "field 'reject': expected an object"),
    "bon_no_losers.json": ("BoN_set/Harmlessness/S1.json", "item 0 (uid 7): field 'loser_list': empty"),
    "bon_losers_not_list.json": ("BoN_set/Harmlessness/S1.json", "field 'loser_list': expected a list"),
    "bon_loser_missing_answer.json": ("BoN_set/Harmlessness/S1.json", "field 'loser_list[1].answer': missing"),
    "unknown_scenario.json": (
        "Pairwise_set/Helpfulness/Chat/Gossip.json",
        "unknown scenario 'Helpfulness/Chat/Gossip'",
    ),
}


def test_corpus_is_complete():
    assert sorted(p.name for p in (CORPUS / "release").iterdir()) == sorted(RELEASE_CASES)
    assert len(RELEASE_CASES) + len(list((CORPUS / "config").iterdir())) >= 20


@pytest.mark.parametrize("name", sorted(RELEASE_CASES))
def test_bad_release_file(tmp_path: Path, name: str):
    place, expected = RELEASE_CASES[name]
    target = tmp_path / "release" / place
    target.parent.mkdir(parents=True)
    shutil.copy(CORPUS / "release" / name, target)
    with pytest.raises(InputError) as exc:
        read_release(tmp_path / "release")
    message = str(exc.value)
    assert message.startswith(place), message
    assert expected in message, message
    assert "\n" not in message


@pytest.mark.parametrize("path", sorted((CORPUS / "config").glob("*.yaml")), ids=lambda p: p.stem)
def test_bad_config(path: Path):
    expected = path.read_text().splitlines()[0].removeprefix("# expect: ")
    with pytest.raises((ConfigError, InputError)) as exc:  # not valid, or not YAML at all (``core.yaml_file``)
        load_config(path)
    assert str(exc.value).startswith(str(path)), exc.value
    assert expected in str(exc.value), exc.value


def test_scenario_path_traversal_is_refused(tmp_path: Path):
    # A set file cannot sit outside its folder, but a scenario id with '..' or a backslash can arrive
    # through other forms; the writer and reader refuse it before using it as a path.
    from rmb_build.core.paths import check_relative_id

    for bad in ("../etc/passwd", "Helpfulness/../../x", "/abs", "a\\b", "Harmlessness/ S1"):
        with pytest.raises(ValueError):
            check_relative_id(bad)
    assert check_relative_id("Helpfulness/Chat/Discussion") == "Helpfulness/Chat/Discussion"


def test_five_megabyte_answer_is_valid(tmp_path: Path):
    item = {
        "pair_uid": "1",
        "conversation_input": [{"content": "hi", "role": "user"}],
        "chosen": {"llm_name": "a", "answer": "word " * 1_000_000},
        "reject": {"llm_name": "b", "answer": "y"},
        "category_path": "Pairwise_set/Helpfulness/Chat/Discussion",
    }
    path = tmp_path / "Pairwise_set/Helpfulness/Chat/Discussion.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([item], indent=1))
    release = read_release(tmp_path)
    assert len(release.pairwise[0].chosen.answer) == 5_000_000


# ---------------------------------------------------------------------------------------------
# Readers account for every file they saw; no folder or file is guessed at


def _release(root: Path) -> Path:
    """Two pairwise scenarios (3 items, then 2) and one BoN scenario (1 item), in RMB's layout."""
    from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
    from rmb_build.release import write_release
    from rmb_build.release.read import Release

    rel = Release(name="linked", root=None)
    q = lambda i: (Turn("user", f"Question {i}?"),)  # noqa: E731
    for i in range(3):
        rel.add(
            PairwiseItem(
                str(i), q(i), Answer("a", "a long answer"), Answer("b", "short"), "Helpfulness/Chat/Discussion"
            )
        )
    for i in range(3, 5):
        rel.add(PairwiseItem(str(i), q(i), Answer("a", "x"), Answer("b", "a longer one"), "Harmlessness/S1"))
    rel.add(
        BonItem(
            "0", q(9), Answer("a", "the longest answer"), (Answer("b", "no"), Answer("c", "nope")), "Harmlessness/S1"
        )
    )
    write_release(rel, root)
    return root


def _evaluate(release: Path, out: Path, capsys) -> tuple[int, str, str]:
    from rmb_build.cli import main

    capsys.readouterr()
    code = main(["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(out),
                 "--cache", str(out.parent / "cache"), "--no-progress", "--bootstrap", "10"])  # fmt: skip
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def test_a_linked_scenario_folder_is_read_and_accounted_for(tmp_path: Path, capsys):
    # issue 37.2: a scenario folder that is a symbolic link was skipped in silence (65 of 358 items scored)
    root = _release(tmp_path / "rel")
    store = tmp_path / "elsewhere"
    (root / "Pairwise_set/Helpfulness").rename(store)
    (root / "Pairwise_set/Helpfulness").symlink_to(store, target_is_directory=True)
    (root / "Pairwise_set/notes.txt").write_text("not a set file")
    (root / "BoN_set/.DS_Store").write_bytes(b"\0")
    release = read_release(root)
    assert len(release.pairwise) == 5 and len(release.bon) == 1
    account = release.account
    assert account.read == [
        "Pairwise_set/Harmlessness/S1.json",
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "BoN_set/Harmlessness/S1.json",
    ]
    assert account.linked == 1 and account.items == 6
    assert sorted(account.skipped) == [("BoN_set/.DS_Store", "hidden"), ("Pairwise_set/notes.txt", "not a .json file")]
    code, out, _ = _evaluate(root, tmp_path / "out", capsys)
    assert code == 0
    assert (
        f"read 3 files (6 items) of {root}, 1 through symbolic links; skipped 2: BoN_set/.DS_Store (hidden), "
        "Pairwise_set/notes.txt (not a .json file)" in out
    )
    results = json.loads((tmp_path / "out/results.json").read_text())
    assert results["pairwise"]["overall"]["n"] == 5 and results["release_read"]["files"] == 3
    assert main_audit(root, capsys).startswith(f"read 3 files (6 items) of {root}, 1 through symbolic links")


def main_audit(root: Path, capsys) -> str:
    from rmb_build.cli import main

    capsys.readouterr()
    assert main(["audit", str(root), "--no-embeddings"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "link, target, expected",
    [
        ("Pairwise_set/Helpfulness/Chat/again", "..", "symbolic link loop: it leads back to"),
        ("Pairwise_set/Harmlessness/loop", "loop", "symbolic link loop: it leads back to itself"),
        (
            "Pairwise_set/Harmlessness/S6.json",
            "gone/S6.json",
            "broken symbolic link: its target 'gone/S6.json' does not exist",
        ),
    ],
)
def test_a_link_loop_or_a_broken_link_is_refused_in_one_line(tmp_path: Path, capsys, link, target, expected):
    root = _release(tmp_path / "rel")
    (root / link).symlink_to(target)
    with pytest.raises(InputError) as exc:
        read_release(root)
    assert str(exc.value) == f"{root / link}: {expected}" + (
        f" {(root / link).parent.parent.resolve()}, a folder that holds it" if target == ".." else ""
    )
    code, out, err = _evaluate(root, tmp_path / "out", capsys)
    assert code == 2 and err.count("\n") == 1 and expected in err and not (tmp_path / "out").exists()


def test_a_linked_folder_of_benchmark_files_is_read(tmp_path: Path):
    from rmb_build.benchmarks.formats import open_release

    store = tmp_path / "store"
    store.mkdir()
    (store / "chat.jsonl").write_text(json.dumps({"prompt": "q?", "chosen": "a", "rejected": "b"}) + "\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/own.jsonl").write_text(json.dumps({"prompt": "p?", "chosen": "c", "rejected": "d"}) + "\n")
    (tmp_path / "bench/linked").symlink_to(store, target_is_directory=True)
    (tmp_path / "bench/README.md").write_text("notes")
    release = open_release(tmp_path / "bench")
    assert len(release.pairwise) == 2 and release.account.read == ["linked/chat.jsonl", "own.jsonl"]
    assert release.account.linked == 1 and release.account.skipped == [
        ("README.md", "not a .json, .jsonl, .parquet file")
    ]


# file -> what the one-line refusal names (after the file's path); each is detected, not given --format
BENCHMARK_CASES = {
    "stray_records.json": "not a benchmark: no record has prompt, chosen or rejected",
    "stray_rows.jsonl": "not a benchmark: no record has prompt, chosen or rejected",
    "stray_object.json": "expected a JSON list of records, got dict",
    "partial_record.jsonl": "line 1: item 0: field 'rejected': missing",
}


def test_benchmark_corpus_is_complete():
    assert sorted(p.name for p in (CORPUS / "benchmark").iterdir()) == sorted(BENCHMARK_CASES)


@pytest.mark.parametrize("name", sorted(BENCHMARK_CASES))
def test_a_stray_file_is_refused_not_guessed_at(tmp_path: Path, name: str):
    from rmb_build.benchmarks.formats import open_release

    # alone, and beside a real benchmark file in a folder: the stray file is named either way
    good = {"prompt": "q?", "chosen": "a", "rejected": "b"}
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder/a_good.jsonl").write_text(json.dumps(good) + "\n")
    for target in (tmp_path / name, tmp_path / "folder" / name):
        shutil.copy(CORPUS / "benchmark" / name, target)
        with pytest.raises(InputError) as exc:
            open_release(target.parent if target.parent.name == "folder" else target)
        assert str(exc.value).startswith(f"{target}: {BENCHMARK_CASES[name]}"), exc.value
        assert "\n" not in str(exc.value)


def test_a_folder_with_no_release_or_benchmark_is_refused_as_such(tmp_path: Path):
    from rmb_build.benchmarks.formats import open_release

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/README.md").write_text("hello")
    with pytest.raises(InputError) as exc:
        open_release(tmp_path / "docs")
    assert str(exc.value) == (
        f"{tmp_path / 'docs'}: holds no release or benchmark: no Pairwise_set/ or BoN_set/ folder, no Hugging Face "
        f"form, and no .json, .jsonl or .parquet files found (read 0 files (0 items) of {tmp_path / 'docs'}; "
        "skipped 1: README.md (not a .json, .jsonl, .parquet file))"
    )


def test_a_hub_dataset_fails_at_once_when_the_hub_is_unreachable(tmp_path: Path):
    # issue 37.10: offline, `--release allenai/reward-bench` retried for 47 s (each warning twice); a model
    # id fails at once. Here the Hub is a closed local port and HF_HUB_OFFLINE is not set.
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": str(tmp_path / "hf")}
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(var)
    for argv in (["evaluate", "--release", "allenai/reward-bench", "--rm", "baseline:length", "--out", "o"],
                 ["audit", "allenai/reward-bench"]):  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "rmb_build.cli", *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (
            f"rmb {argv[0]}: error: allenai/reward-bench: the Hugging Face Hub cannot be reached (offline?): set "
            "HF_HUB_OFFLINE=1 to read a copy from the local cache, or give a local file or folder\n"
        )


def test_a_uid_collision_is_found_and_fix_renumbers_it_so_review_accepts_the_copy(tmp_path: Path, capsys):
    # issue 37.9: one pair_uid with different texts: audit found nothing, review refused the release and
    # sent the user to `audit --fix`, which did not change it
    from rmb_build.cli import main
    from rmb_build.core.errors import RMBError
    from rmb_build.review.session import index_items

    root = tmp_path / "rel"
    (root / "Pairwise_set/Helpfulness/Chat").mkdir(parents=True)
    shutil.copy(CORPUS / "audit/uid_collision.json", root / "Pairwise_set/Helpfulness/Chat/Discussion.json")
    with pytest.raises(RMBError, match="uid 1 appears twice in the pairwise set.*removes or renumbers the later"):
        index_items(read_release(root))
    capsys.readouterr()
    assert main(["audit", str(root), "--no-embeddings", "--json", str(tmp_path / "a.json"), "--fix", str(tmp_path / "fixed")]) == 0  # fmt: skip
    audit = json.loads((tmp_path / "a.json").read_text())
    assert audit["counts"]["uid_collision"] == 1 and audit["counts"]["duplicate_item"] == 1  # uid 2: same texts
    entry = audit["defects"]["uid_collision"][0]
    assert (entry["uid"], entry["index"], entry["first"]["index"], entry["new_uid"]) == ("1", 2, 0, "3")
    fixed = read_release(tmp_path / "fixed")
    assert [(it.uid, it.conversation[0].content) for it in fixed.pairwise] == [
        ("1", "What is a good name for a cat?"),
        ("2", "Is tea better than coffee?"),
        ("3", "Name a colour."),
    ]
    assert len(index_items(fixed)) == 3  # review serve's check now passes
    renumbered = [json.loads(line) for line in (tmp_path / "fixed/renumbered.jsonl").read_text().splitlines()]
    assert [(r["uid"], r["new_uid"], r["item"]["pair_uid"]) for r in renumbered] == [("1", "3", "1")]
    assert "renumbered 1" in capsys.readouterr().out
    assert main(["audit", str(tmp_path / "fixed"), "--no-embeddings", "--strict"]) == 0


def test_audit_of_a_folder_or_file_that_is_no_release_is_refused_not_read_as_the_hugging_face_form(tmp_path: Path):
    # was: read as the Hugging Face form, failing on `datasets`' EmptyDatasetError after its warnings
    import subprocess
    import sys

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/README.md").write_text("hello")
    shutil.copy(CORPUS / "benchmark/stray_records.json", tmp_path / "stray.json")
    for target in ("docs", "stray.json"):
        proc = subprocess.run(
            [sys.executable, "-m", "rmb_build.cli", "audit", target, "--no-embeddings"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == (
            f"rmb audit: error: {target}: not an RMB release: no Pairwise_set/ or BoN_set/ folder (in it or in its "
            "RMB_dataset/) and no Hugging Face form (Parquet files under pairwise/ or bon/)\n"
        )
