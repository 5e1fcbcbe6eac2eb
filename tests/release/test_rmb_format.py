"""The RMB release format, byte for byte, on the real sample files and on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmb_build.core.errors import InputError
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, all_scenarios
from rmb_build.release import read_release, read_rmb_release, write_release
from rmb_build.release.rmb_format import dumps_items


def test_taxonomy_shape():
    scen = all_scenarios()
    assert len(scen) == 49
    assert sum(1 for s in scen if s.goal == "Helpfulness") == 37
    assert len({s.task for s in scen if s.task}) == 12
    assert {s.id for s in scen if s.goal == "Harmlessness"} == {f"Harmlessness/S{i}" for i in range(1, 12)} | {
        "Harmlessness/multi"
    }


def test_reads_every_sample_file_and_writes_identical_bytes(rmb_sample: Path, tmp_path: Path):
    release = read_release(rmb_sample)
    files = sorted(rmb_sample.rglob("*.json"))
    assert len(files) == 10
    assert len(release.files) == 10
    for items in release.files.values():
        src = rmb_sample / release.file_of(items[0])
        assert dumps_items(items).encode("utf-8") == src.read_bytes(), src
    write_release(release, tmp_path)
    for src in files:
        out = tmp_path / src.relative_to(rmb_sample)
        assert out.read_bytes() == src.read_bytes(), out
    assert sum(len(v) for (s, _), v in release.files.items() if s == PAIRWISE_SET) == 1353
    assert all(2 <= len(it.losers) <= 6 for it in release.items(BON_SET))


def test_sample_scenarios_and_uids(rmb_sample: Path):
    release = read_release(rmb_sample)
    assert set(release.scenarios()) == {
        "Helpfulness/Chat/Discussion",
        "Helpfulness/Code/Documentation",
        "Helpfulness/Translation/Literary and Cultural Translation",
        "Harmlessness/S6",
        "Harmlessness/multi",
    }
    item = release.files[(PAIRWISE_SET, "Harmlessness/S6")][0]
    assert item.uid == "14270" and item.conversation[-1].role == "user"
    assert item.category_path == "Pairwise_set/Harmlessness/S6"


def _write(root: Path, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))


GOOD_PAIR = {
    "pair_uid": "1",
    "conversation_input": [{"content": "hi", "role": "user"}],
    "chosen": {"llm_name": "a", "answer": "x"},
    "reject": {"llm_name": "b", "answer": "y"},
    "category_path": "Pairwise_set/Helpfulness/Chat/Discussion",
}


def test_turn_without_language_stays_without_it(tmp_path: Path):
    text = json.dumps([GOOD_PAIR], indent=1, ensure_ascii=False)
    _write(tmp_path / "in", "Pairwise_set/Helpfulness/Chat/Discussion.json", text)
    release = read_release(tmp_path / "in")
    write_release(release, tmp_path / "out")
    assert (tmp_path / "out/Pairwise_set/Helpfulness/Chat/Discussion.json").read_text() == text


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: "[{", "truncated JSON"),
        (lambda d: b"[\xff\xfe]", "invalid UTF-8"),
        (lambda d: [dict(d, chosen={"llm_name": "a"})], "field 'chosen.answer': missing"),
        (lambda d: [dict(d, conversation_input=[])], "empty conversation"),
        (lambda d: [dict(d, conversation_input=[{"content": "x", "role": "assistant"}])], "not a user turn"),
        (lambda d: [dict(d, conversation_input=[{"content": 3, "role": "user"}])], "conversation_input[0].content"),
        (lambda d: {"a": 1}, "expected a JSON list"),
    ],
)
def test_bad_input_names_file_item_and_field(tmp_path: Path, mutate, needle):
    data = mutate(GOOD_PAIR)
    text = data if isinstance(data, (str, bytes)) else json.dumps(data)
    _write(tmp_path, "Pairwise_set/Helpfulness/Chat/Discussion.json", text)
    with pytest.raises(InputError) as exc:
        read_release(tmp_path)
    assert "Pairwise_set/Helpfulness/Chat/Discussion.json" in str(exc.value)
    assert needle in str(exc.value)


def test_empty_loser_list_and_unknown_set_folder(tmp_path: Path):
    bon = {
        "conversation_input": [{"content": "q", "role": "user"}],
        "bon_best": {"llm_name": "a", "answer": "x"},
        "loser_list": [],
        "bon_uid": "7",
        "category_path": "BoN_set/Harmlessness/S1",
    }
    _write(tmp_path / "a", "BoN_set/Harmlessness/S1.json", json.dumps([bon]))
    with pytest.raises(InputError, match=r"item 0 \(uid 7\): field 'loser_list'"):
        read_release(tmp_path / "a")
    _write(tmp_path / "b", "Pairwise_set/Harmlessness/S1.json", json.dumps([GOOD_PAIR]))
    _write(tmp_path / "b", "Extra_set/Harmlessness/S1.json", "[]")
    with pytest.raises(InputError, match="unknown set folder 'Extra_set'"):
        read_release(tmp_path / "b")


def test_unknown_scenario_is_strict_only(tmp_path: Path):
    _write(tmp_path, "Pairwise_set/Helpfulness/Chat/Gossip.json", json.dumps([GOOD_PAIR]))
    with pytest.raises(InputError, match="unknown scenario 'Helpfulness/Chat/Gossip'"):
        read_release(tmp_path)
    assert read_rmb_release(tmp_path, strict=False).scenarios() == ["Helpfulness/Chat/Gossip"]


def test_release_files_are_written_atomically_and_readable(tmp_path: Path, monkeypatch):
    import stat

    from rmb_build.core import atomic

    text = json.dumps([GOOD_PAIR], indent=1, ensure_ascii=False)
    _write(tmp_path / "in", "Pairwise_set/Helpfulness/Chat/Discussion.json", text)
    release = read_release(tmp_path / "in")
    target = tmp_path / "out/Pairwise_set/Helpfulness/Chat/Discussion.json"
    write_release(release, tmp_path / "out")
    assert stat.S_IMODE(target.stat().st_mode) & 0o044  # readable by others, not mkstemp's 0600
    target.write_text("old")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(OSError):
        write_release(release, tmp_path / "out")
    assert target.read_text() == "old"  # never half-written
    assert [p.name for p in target.parent.iterdir()] == ["Discussion.json"]  # no temp file left behind


@pytest.mark.parametrize("text", ["[1, 2]", '"a name"', "3"])
def test_a_manifest_that_is_not_an_object_is_refused_in_one_line_naming_the_file(tmp_path: Path, text: str):
    # before: read as it was, then the card, audit or publish crashed on ``.get`` of a list, str or int
    from release_helpers import tiny_release

    root = tiny_release(tmp_path / "tiny")
    (root / "manifest.json").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"manifest\.json.*expected a JSON object, got "):
        read_release(root)
