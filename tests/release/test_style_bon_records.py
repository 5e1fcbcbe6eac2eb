"""Style_set/ records made from a BoN item (a build's ``style.bon``): ``set: "bon"`` and ``loser`` added to
INTERFACES.md's record; read strictly (a bad ``set`` or ``loser`` refused in one line naming file, record and
field), told apart from the pairwise record with the same uid, and audited against the BoN items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmb_build.core.errors import InputError
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.audit import audit_release
from rmb_build.release.read import Release, read_rmb_release

SCENARIO = "Helpfulness/Chat/Discussion"
TURNS = (Turn("user", "How do tides work?"),)


def _record(uid: str, **extra) -> dict:
    sides = {s: [f"{s} {uid} {v}" for v in ("concise", "plain", "markdown")] for s in ("chosen", "rejected")}
    turns = [{"content": TURNS[0].content, "role": "user"}]
    return {"id": uid, "prompt": TURNS[0].content, "conversation_input": turns, **sides, "scenario": SCENARIO, **extra}


def _release(root: Path, records: list[dict]) -> Path:
    rel = Release(name="bon-style", root=None)
    rel.add(PairwiseItem("0", TURNS, Answer("m1", "good"), Answer("m2", "bad"), SCENARIO))
    rel.add(BonItem("0", TURNS, Answer("m1", "best"), (Answer("m2", "worse"), Answer("m3", "worst")), SCENARIO))
    write_release(rel, root)
    path = root / "Style_set" / f"{SCENARIO}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return root


def test_a_bon_record_and_a_pairwise_record_share_a_uid_and_are_audited_against_their_own_set(tmp_path):
    records = [
        _record("0"),
        _record("0", set="bon", loser=1),
        _record("0", set="bon", loser=2),  # no loser_list[2]
        _record("7", set="bon", loser=0),  # no BoN item 7
    ]
    style = read_rmb_release(_release(tmp_path / "rel", records), strict=False).style
    assert [(r.set_name, r.id, r.loser) for r in style] == [
        ("pairwise", "0", None),
        ("bon", "0", 1),
        ("bon", "0", 2),
        ("bon", "7", 0),
    ]
    report = audit_release(read_rmb_release(tmp_path / "rel", strict=False), near_duplicates=False)
    got = [(d["index"], d["detail"]) for d in report.defects["style_orphan"]]
    assert got == [(2, "bon item '0' has 2 losers, no loser_list[2]"), (3, "no bon item has bon_uid '7'")]


@pytest.mark.parametrize(
    "extra,field,says",
    [
        ({"set": "rewardbench"}, "set", "expected 'pairwise' or 'bon', got 'rewardbench'"),
        ({"set": "bon"}, "loser", "got None"),
        ({"set": "bon", "loser": True}, "loser", "got True"),
        ({"set": "bon", "loser": -1}, "loser", "got -1"),
        ({"set": "bon", "loser": "0"}, "loser", "got '0'"),
    ],
)
def test_a_bad_set_or_loser_is_refused_naming_file_record_and_field(tmp_path, extra, field, says):
    _release(tmp_path / "rel", [_record("0"), _record("0", **extra)])
    with pytest.raises(InputError) as err:
        read_rmb_release(tmp_path / "rel")
    line = str(err.value)
    assert f"Style_set/{SCENARIO}.json" in line and "1 (id 0)" in line and field in line and says in line


def test_a_bon_record_repeated_is_refused_but_not_the_pairwise_one_of_the_same_uid(tmp_path):
    _release(tmp_path / "rel", [_record("0"), _record("0", set="bon", loser=0), _record("0", set="bon", loser=1)])
    with pytest.raises(InputError, match=r"item 2 \(id 0\).*repeats the id of .*record 1 \(bon id 0\)"):
        read_rmb_release(tmp_path / "rel")
