"""The RewardBench reader and headline: pairs scored by a scorer the test controls, figures by hand."""

from __future__ import annotations

import pytest
from formats_helpers import ans, evaluate, evaluate_error, write_json, write_jsonl, write_parquet

# (subset, chosen score, rejected score)
PAIRS = [
    ("alpacaeval-easy", 5, 1),  # right
    ("alpacaeval-easy", 2, 3),  # wrong
    ("mt-bench-easy", 4, 4),  # a tie: wrong under strict, half a point under half
    ("llmbar-natural", 3, 1),  # right
    ("mt-bench-hard", 1, 2),  # wrong
    ("donotanswer", 2, 1),  # right
    ("math-prm", 1, 2),  # wrong
    ("hep-python", 3, 2),  # right
    ("anthropic_helpful", 2, 1),  # right
    ("shp", 1, 2),  # wrong
    ("my-own-subset", 1, 0),  # right, in no section
]


def rows() -> list[dict]:
    return [
        {
            "id": 100 + i,
            "prompt": f"question {i}?",
            "chosen": ans(c, f"good {i}"),
            "rejected": ans(r, f"bad {i}"),
            "chosen_model": "model-a",
            "rejected_model": "model-b",
            "subset": s,
        }
        for i, (s, c, r) in enumerate(PAIRS)
    ]


def expected_strict() -> dict:
    # Sections weigh each subset by RewardBench's subset size.
    chat = (0.5 * 100 + 0.0 * 28) / (100 + 28)  # alpacaeval-easy 1/2, mt-bench-easy 0/1
    chat_hard = (1.0 * 100 + 0.0 * 37) / (100 + 37)  # llmbar-natural 1/1, mt-bench-hard 0/1
    safety = 1.0  # donotanswer 1/1
    reasoning = (0.0 * 984 + 1.0 * 164) / (984 + 164)  # math-prm 0/1 (weighed as 984), hep-python 1/1
    prior = (1.0 + 0.0) / 2  # anthropic_helpful 1/1, shp 0/1: a plain mean
    headline = (chat + chat_hard + safety + reasoning + 0.5 * prior) / 4.5  # Prior Sets weigh half
    return {
        "Chat": chat,
        "Chat Hard": chat_hard,
        "Safety": safety,
        "Reasoning": reasoning,
        "Prior Sets": prior,
        "headline": headline,
    }


def test_rewardbench_jsonl_sections_and_headline(tmp_path):
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb.jsonl", rows()))
    bench = res["benchmark"]
    want = expected_strict()
    assert bench["format"] == "rewardbench"
    assert bench["headline"] == pytest.approx(want.pop("headline"))
    assert bench["sections"] == pytest.approx(want)
    assert bench["section_weights"] == {  # get_average_over_rewardbench's 2, 2, 2, 2, 1
        "Chat": 2.0,
        "Chat Hard": 2.0,
        "Safety": 2.0,
        "Reasoning": 2.0,
        "Prior Sets": 1.0,
    }
    assert bench["subsets"]["my-own-subset"] == {"accuracy": 1.0, "n": 1, "section": "Other"}
    assert bench["subsets"]["alpacaeval-easy"]["accuracy"] == 0.5
    # The generic figures are still there: sections are the goals, subsets the scenarios.
    assert res["pairwise"]["scenarios"]["Chat/alpacaeval-easy"] == {
        **res["pairwise"]["scenarios"]["Chat/alpacaeval-easy"],
        "accuracy": 0.5,
        "n": 2,
    }
    assert res["pairwise"]["goals"]["Chat"]["micro"] == pytest.approx(1 / 3)  # 1 right of 3 Chat pairs
    assert res["pairwise"]["overall"]["n"] == len(PAIRS) and res["bon"]["overall"] == {}
    assert {"schema_version", "rm", "release", "ties", "bootstrap", "pairwise", "bon"} <= set(res)


def test_a_tie_is_wrong_under_either_ties_as_reward_bench_counts_it(tmp_path):
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb.jsonl", rows()), "--ties", "half")
    # mt-bench-easy's tie is half a point in RMB's figures, but wrong in RewardBench's (chosen > rejected)
    assert res["pairwise"]["scenarios"]["Chat/mt-bench-easy"]["accuracy"] == 0.5
    assert res["benchmark"]["sections"]["Chat"] == pytest.approx(expected_strict()["Chat"])
    assert "a tie counts as wrong" in res["benchmark"]["tie_rule"]


def test_a_folder_of_json_and_parquet_reads_as_one_release(tmp_path):
    all_rows = rows()
    write_json(tmp_path / "rb" / "a.json", all_rows[:4])
    write_parquet(tmp_path / "rb" / "sub" / "b.parquet", all_rows[4:])
    (tmp_path / "rb" / "README.md").write_text("not a table")
    res = evaluate(tmp_path, tmp_path / "rb")
    want = expected_strict()
    assert res["benchmark"]["headline"] == pytest.approx(want["headline"])
    assert res["pairwise"]["overall"]["n"] == len(PAIRS)


def test_sections_without_prior_sets_weigh_alike(tmp_path):
    no_prior = [r for r in rows() if r["subset"] not in ("anthropic_helpful", "shp")]
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb.jsonl", no_prior))
    want = expected_strict()
    assert "Prior Sets" not in res["benchmark"]["sections"]
    assert res["benchmark"]["headline"] == pytest.approx(
        (want["Chat"] + want["Chat Hard"] + want["Safety"] + want["Reasoning"]) / 4
    )


def test_a_release_without_every_section_has_no_headline(tmp_path, capsys):
    only = [r for r in rows() if r["subset"] in ("alpacaeval-easy", "donotanswer")]
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb.jsonl", only))
    assert "rewardbench headline: none (no subset of Chat Hard, Reasoning: " in capsys.readouterr().out
    assert res["benchmark"]["sections"] == {"Chat": 0.5, "Safety": 1.0}
    assert res["benchmark"]["headline"] is None  # reward-bench's get_average_over_rewardbench computes none
    assert res["benchmark"]["headline_reason"].startswith("no subset of Chat Hard, Reasoning")


def test_bad_rewardbench_rows_name_file_row_and_field(tmp_path, capsys):
    bad = rows()[:3]
    del bad[1]["rejected"]
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "missing.jsonl", bad), capsys)
    assert "missing.jsonl: line 2: item 1 (id 101): field 'rejected': missing" in err
    bad = rows()[:3]
    bad[2]["chosen"] = 7
    err = evaluate_error(tmp_path, write_json(tmp_path / "odd.json", bad), capsys)
    assert "odd.json: item 2 (id 102): field 'chosen': expected a string or a list of strings, got int" in err
    bad = rows()[:3]
    bad[0]["prompt"] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    err = evaluate_error(tmp_path, write_json(tmp_path / "turns.json", bad), capsys)
    assert "turns.json: item 0 (id 100): field 'prompt': conversation ends with a 'assistant' turn" in err


def test_duplicate_ids_across_a_folder_are_an_error(tmp_path, capsys):
    write_jsonl(tmp_path / "rb" / "a.jsonl", rows()[:2])
    write_jsonl(tmp_path / "rb" / "b.jsonl", rows()[1:3])
    err = evaluate_error(tmp_path, tmp_path / "rb", capsys)
    assert "b.jsonl: line 1: item 0 (id 101): field 'id': duplicate id '101'" in err and "a.jsonl" in err
