"""The RewardBench 2 reader and headline: best-of-4 accuracy per subset and Ties by its own rule,
with a scorer the test controls and figures computed by hand."""

from __future__ import annotations

import math

import pytest
from formats_helpers import ans, evaluate, evaluate_error, write_jsonl, write_parquet


def row(uid: str, subset: str, chosen: list[float], rejected: list[float]) -> dict:
    return {
        "id": uid,
        "prompt": f"prompt {uid.split(':')[-1]} of {subset}?",
        "subset": subset,
        "chosen": [ans(s, f"{uid} right {k}") for k, s in enumerate(chosen)],
        "rejected": [ans(s, f"{uid} wrong {j}") for j, s in enumerate(rejected)],
        "num_correct": len(chosen),
    }


ROWS = [
    row("f1", "Factuality", [5], [1, 2, 3]),  # 5 beats all: 1
    row("f2", "Factuality", [3], [1, 4, 2]),  # 4 beats it: 0
    row("m1", "Math", [4], [4, 1, 2]),  # tied at the top with one other: 1/2 (reward-bench's rule, either --ties)
    row("m2", "Math", [6], [1, 1, 1]),  # 1
    row("x1", "Focus", [2], [3, 3, 1]),  # 0
    row("p1", "Precise IF", [3], [1, 1, 1]),  # 1
    row("s1", "Safety", [1], [2, 0, 0]),  # 0
    # Ties: prompt 1 and prompt 2, each as a reference row and a tied row.
    row("ref:1", "Ties", [5], [1, 2]),  # margin 5-2 = 3 > 0: accurate
    row("tied:1", "Ties", [6, 4], [1, 3]),  # margin min(6,4)-3 = 1: accurate; spread 6-4 = 2
    row("ref:2", "Ties", [2], [3]),  # margin 2-3 = -1: not accurate
    row("tied:2", "Ties", [5, 4, 4.5], [1]),  # margin 4-1 = 3: accurate; spread 5-4 = 1
]


def expected_ties() -> float:
    ref_accuracy = 1 / 2  # ref:1 accurate, ref:2 not
    tied_accuracy = 2 / 2  # both tied rows accurate
    # correctness preferred: the tied margin exceeds the spread of the correct answers
    preferred = (0 + 1) / 2  # prompt 1: 1 > 2 no; prompt 2: 3 > 1 yes
    # hard: the smaller of the ref and tied margins exceeds the spread
    preferred_hard = (0 + 0) / 2  # prompt 1: min(3, 1) = 1 > 2 no; prompt 2: min(-1, 3) = -1 > 1 no
    margin = (math.tanh(1 / 2 - 1) + math.tanh(-1 / 1 - 1)) / 2
    return 0.30 * tied_accuracy + 0.30 * ref_accuracy + 0.20 * preferred + 0.20 * preferred_hard + 0.01 * margin


def test_parquet_file_best_of_4_and_ties(tmp_path):
    res = evaluate(tmp_path, write_parquet(tmp_path / "rb2.parquet", ROWS))
    bench = res["benchmark"]
    assert bench["format"] == "rewardbench2"
    ties = expected_ties()
    sections = {"Factuality": 1 / 2, "Math": 3 / 4, "Focus": 0.0, "Precise IF": 1.0, "Safety": 0.0, "Ties": ties}
    assert bench["sections"] == pytest.approx(sections)
    assert bench["headline"] == pytest.approx(sum(sections.values()) / 6)  # the leaderboard's mean of six
    t = bench["subsets"]["Ties"]
    assert (t["ref_accuracy"], t["tied_accuracy"], t["n_paired"]) == (0.5, 1.0, 2)
    assert (t["correctness_preferred"], t["correctness_preferred_hard"]) == (0.5, 0.0)
    assert bench["subsets"]["Math"] == {"score": 0.75, "n": 2}
    # Generic Best-of-N figures: one item per row outside Ties, one per correct answer in Ties.
    assert res["bon"]["scenarios"]["Math"]["n"] == 2 and res["pairwise"]["overall"] == {}
    assert res["bon"]["scenarios"]["Ties"]["n"] == 1 + 2 + 1 + 3
    assert res["bon"]["scenarios"]["Ties"]["accuracy"] == pytest.approx(6 / 7)  # only ref:2's answer loses


def test_a_top_tie_shares_the_point_under_either_ties(tmp_path):
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb2.jsonl", ROWS), "--ties", "half")
    # m1: the chosen 4 ties one rejected 4 at the top: 1/2 point; m2: 1 point; as under strict
    assert res["benchmark"]["sections"]["Math"] == pytest.approx((1 / 2 + 1) / 2)
    assert res["benchmark"]["sections"]["Factuality"] == 0.5
    assert res["bon"]["scenarios"]["Math"]["accuracy"] == 0.5  # RMB's own BoN rule: only a strict win counts


def test_ties_without_paired_prompts_is_reported_without_a_score(tmp_path):
    res = evaluate(
        tmp_path, write_jsonl(tmp_path / "rb2.jsonl", [ROWS[0], next(r for r in ROWS if r["id"] == "ref:1")])
    )
    ties = res["benchmark"]["subsets"]["Ties"]
    assert ties["score"] is None and "no prompt has both" in ties["reason"]
    assert res["benchmark"]["sections"]["Factuality"] == 1.0
    assert res["benchmark"]["headline"] is None  # the leaderboard's figure needs all six subsets
    assert res["benchmark"]["headline_reason"].startswith("no score for Precise IF, Math, Safety, Focus, Ties")


def test_bad_rewardbench2_rows(tmp_path, capsys):
    bad = [row("7", "Ties", [1, 2], [0])]
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "ties.jsonl", bad), capsys)
    assert "ties.jsonl: line 1: item 0 (id 7): field 'id': a Ties row needs an id 'ref:<n>' or 'tied:<n>'" in err
    bad = [row("ref:1", "Ties", [1], [0]), row("ref:01", "Ties", [2], [0])]
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "again.jsonl", bad), capsys)
    assert (
        "again.jsonl: line 2: item 1 (id ref:01): field 'id': 'ref:01' is Ties prompt ref:1 again (also id 'ref:1')"
        in err
    )
    bad = [row("a", "Math", [1], [0]), row("b", "Math", [1], [])]
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "empty.jsonl", bad), capsys)
    assert "empty.jsonl: line 2: item 1 (id b): field 'rejected': expected at least 1 answer, got 0" in err
    bad = [dict(row("a", "Math", [1], [0]), num_correct=2)]
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "count.jsonl", bad), capsys)
    assert "field 'num_correct': is 2 but the row has 1 chosen answers" in err
    bad = [row("a", "Math", [1], [0]), dict(row("b", "Math", [1], [0]), chosen="1|a string")]
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "mixed.jsonl", bad), capsys)
    assert "mixed.jsonl: line 2: item 1 (id b): field 'rejected': is a list but 'chosen' is a string" in err
