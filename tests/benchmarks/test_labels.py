"""Names from the data (subsets such as ``bigcode/humanevalpack``) stay verbatim as labels and are
percent-encoded ('%' and '/') where they become part of a scenario id or a file name."""

from __future__ import annotations

import pytest
from formats_helpers import ans, evaluate, write_jsonl

from rmb_build.benchmarks.base import decode_label, encode_label
from rmb_build.benchmarks.formats import open_release
from rmb_build.core.items import set_file
from rmb_build.core.taxonomy import PAIRWISE_SET, parse_scenario_id
from rmb_build.release import write_release

ODD = ("bigcode/humanevalpack", "a%2Fb", "50%/x")  # a '/', a literal '%2F', both


@pytest.mark.parametrize(
    "name, encoded",
    [
        ("bigcode/humanevalpack", "bigcode%2Fhumanevalpack"),
        ("a%2Fb", "a%252Fb"),
        ("50%/x", "50%25%2Fx"),
        ("plain-name", "plain-name"),
        ("", ""),
    ],
)
def test_encoding_is_percent_and_slash_only_and_reversible(name, encoded):
    assert encode_label(name) == encoded and decode_label(encoded) == name


def test_rewardbench_subsets_with_a_slash(tmp_path):
    rows = [
        {
            "id": k,
            "prompt": f"q{k}?",
            "chosen": ans(2, f"good {k}"),
            "rejected": ans(1 if k else 3, f"bad {k}"),
            "subset": subset,
        }
        for k, subset in enumerate(ODD)
    ]
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb.jsonl", rows))
    subsets = res["benchmark"]["subsets"]
    assert subsets["bigcode/humanevalpack"] == {"accuracy": 0.0, "n": 1, "section": "Other"}  # three subsets, verbatim
    assert subsets["a%2Fb"]["accuracy"] == 1.0 and subsets["50%/x"]["accuracy"] == 1.0
    scenarios = res["pairwise"]["scenarios"]
    assert set(scenarios) == {"Other/bigcode%2Fhumanevalpack", "Other/a%252Fb", "Other/50%25%2Fx"}
    assert {parse_scenario_id(s).goal for s in scenarios} == {"Other"} and set(res["pairwise"]["goals"]) == {"Other"}
    assert {decode_label(parse_scenario_id(s).name) for s in scenarios} == set(ODD)
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Other/bigcode%2Fhumanevalpack" in report and (tmp_path / "out" / "heatmap.png").is_file()


def test_rewardbench2_subset_with_a_slash(tmp_path):
    rows = [
        {
            "id": str(k),
            "prompt": f"q{k}?",
            "chosen": [ans(5, f"good {k}")],
            "subset": subset,
            "num_correct": 1,
            "rejected": [ans(s, f"bad {k} {j}") for j, s in enumerate((1, 2, 3 if k else 9))],
        }
        for k, subset in enumerate(ODD)
    ]
    res = evaluate(tmp_path, write_jsonl(tmp_path / "rb2.jsonl", rows))
    assert res["benchmark"]["format"] == "rewardbench2"
    assert res["benchmark"]["sections"] == {"bigcode/humanevalpack": 0.0, "a%2Fb": 1.0, "50%/x": 1.0}
    assert set(res["bon"]["scenarios"]) == {"bigcode%2Fhumanevalpack", "a%252Fb", "50%25%2Fx"}


def test_an_encoded_scenario_is_one_file_name(tmp_path):
    rows = [{"id": 1, "prompt": "q?", "chosen": "1|a", "rejected": "0|b", "subset": "bigcode/humanevalpack"}]
    release = open_release(write_jsonl(tmp_path / "rb.jsonl", rows))
    assert release.item_meta[(PAIRWISE_SET, "1")] == {"subset": "bigcode/humanevalpack"}
    written = write_release(release, tmp_path / "copy")
    assert written == [tmp_path / "copy" / set_file(PAIRWISE_SET, "Other/bigcode%2Fhumanevalpack")]
    assert written[0].name == "bigcode%2Fhumanevalpack.json" and written[0].parent.name == "Other"
