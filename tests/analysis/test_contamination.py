"""rmb contamination: release items whose prompt is an exact or near-duplicate of a training prompt."""

from __future__ import annotations

import json

import pytest

from rmb_build.cli import main
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release

PROMPTS = {
    "0": "How do I reverse a linked list in C?",
    "1": "Write a limerick about a forgetful wizard.",
    "2": "What are the health benefits of green tea?",
}


def _release(tmp_path):
    release = Release("tiny", None)
    for uid, text in PROMPTS.items():
        convo = (Turn("user", text, "English"),)
        release.add(
            PairwiseItem(
                uid,
                convo,
                Answer("m1", f"good answer {uid}"),
                Answer("m2", f"bad answer {uid}"),
                "Helpfulness/Code/Development and Implementation",
            )
        )
    # the same conversation as pairwise 0 in the BoN set: listed too
    release.add(
        BonItem(
            "0",
            (Turn("user", PROMPTS["0"], "English"),),
            Answer("m1", "best"),
            (Answer("m2", "l1"), Answer("m3", "l2")),
            "Helpfulness/Code/Development and Implementation",
        )
    )
    root = tmp_path / "release"
    write_release(release, root)
    return root


def _train(tmp_path):
    rows = [
        {"id": "t-exact", "prompt": "how do I reverse a linked list in C?  "},  # exact after normalising
        {"id": "t-near", "prompt": "Write a limerick about a wizard who keeps forgetting things."},
        {"id": "t-other", "prompt": "Explain the rules of cricket."},
        {"id": "t-bad", "prompt": 42},  # quarantined, not fatal
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow  # encodes with the real sentence encoder: 25 s under load
def test_lists_exact_and_near_duplicates_with_similarity(tmp_path, capsys):
    root, train = _release(tmp_path), _train(tmp_path)
    out = tmp_path / "hits.json"
    assert main(["contamination", str(root), str(train), "--threshold", "0.75", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    hits = {(h["set"], h["uid"]): h for h in report["items"]}
    assert set(hits) == {("pairwise", "0"), ("bon", "0"), ("pairwise", "1")}
    assert hits[("pairwise", "0")]["kind"] == "exact" and hits[("pairwise", "0")]["similarity"] == 1.0
    assert hits[("bon", "0")]["train_id"] == "t-exact"
    near = hits[("pairwise", "1")]
    assert near["kind"] == "near" and near["train_id"] == "t-near" and 0.75 <= near["similarity"] < 1
    assert report["contaminated_items"] == 3 and report["release_items"] == 4 and report["train_prompts"] == 3
    assert report["train_stats"]["quarantined"] == 1
    assert "3 of 4 release items" in capsys.readouterr().out

    assert main(["contamination", str(root), str(train), "--threshold", "0.99", "--json", str(out)]) == 0
    assert {(h["set"], h["uid"]) for h in json.loads(out.read_text())["items"]} == {("pairwise", "0"), ("bon", "0")}


@pytest.mark.torch
def test_another_release_as_training_set_and_bad_arguments(tmp_path, capsys):
    root = _release(tmp_path)
    assert main(["contamination", str(root), str(root)]) == 0
    assert "4 of 4 release items" in capsys.readouterr().out
    assert main(["contamination", str(root), str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert main(["contamination", str(root), str(_train(tmp_path)), "--threshold", "1.5"]) == 2
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text('{"id": 1, "body": "text"}\n')
    assert main(["contamination", str(root), str(nothing)]) == 2
    assert "--field" in capsys.readouterr().err
    assert main(["contamination", str(root), str(nothing), "--field", "body"]) == 0
