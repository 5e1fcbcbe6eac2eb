"""Which format a release is read as: detection from its fields, ``--format`` overriding it, and
inputs that are no benchmark at all."""

from __future__ import annotations

import pytest
from formats_helpers import ans, evaluate, evaluate_error, write_json, write_jsonl

from rmb_build.benchmarks.formats import detect_format, open_release
from rmb_build.benchmarks.tables import local_rows
from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release


def lists(n_chosen: int, n_rejected: int, **extra) -> dict:
    return {
        "prompt": "q?",
        "chosen": [ans(k + 1, f"c{k}") for k in range(n_chosen)],
        "rejected": [ans(0, f"r{k}") for k in range(n_rejected)],
        **extra,
    }


@pytest.mark.parametrize(
    "records, fmt",
    [
        ([{"prompt": "q?", "chosen": "1|a", "rejected": "0|b", "subset": "alpacaeval-easy"}], "rewardbench"),
        ([lists(1, 3, subset="Math", num_correct=1)], "rewardbench2"),
        ([lists(1, 3, total_completions=4), lists(2, 2, models=["m1", "m2"])], "rewardbench2"),  # any of its own fields
        ([lists(3, 3)], "rm-bench"),  # three styles per side
        ([lists(3, 3, subset="alpacaeval")], "rm-bench"),  # RM-Bench's own files have a subset: it decides nothing
        ([lists(3, 3, subset="bigcode/humanevalpack", domain="code")], "rm-bench"),
    ],
)
def test_detection_from_fields(tmp_path, records, fmt):
    assert detect_format(local_rows(write_jsonl(tmp_path / "b.jsonl", records))) == fmt


@pytest.mark.parametrize(
    "records, message",
    [
        # neither three styles per side nor RewardBench 2's fields: the record that breaks RM-Bench's shape is named
        (
            [lists(1, 3, subset="Math")],
            "b.jsonl: line 1: item 0: field 'chosen': has 1 answer where RM-Bench has 3 "
            "(one per style); this record has none of RewardBench 2's fields",
        ),
        ([lists(3, 3), lists(3, 2)], "b.jsonl: line 2: item 1: field 'rejected': has 2 answers where RM-Bench has 3"),
        # a domain field decides nothing either
        ([lists(3, 3, domain="chat"), lists(1, 3, domain="chat")], "line 2: item 1: field 'chosen': has 1 answer"),
        # RewardBench 2's fields in one record only, the other not of RM-Bench's shape
        (
            [lists(3, 3), lists(1, 3, num_correct=1)],
            "line 2: item 1: field 'chosen': has 1 answer where RM-Bench has 3 "
            "(one per style); item 0 has none of RewardBench 2's fields",
        ),
    ],
)
def test_a_release_fitting_no_format_asks_for_format(tmp_path, capsys, records, message):
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "b.jsonl", records), capsys)
    assert message in err and err.endswith("fits no format; pass --format rm-bench or --format rewardbench2")


def test_a_release_fitting_two_formats_asks_for_format(tmp_path, capsys):
    path = write_json(tmp_path / "styles.json", [lists(3, 3, subset="Ties", num_correct=3, id="tied:1")])
    err = evaluate_error(tmp_path, path, capsys)
    assert err.endswith(
        "styles.json: fits both rm-bench and rewardbench2 (RM-Bench's three answers per side and "
        "RewardBench 2's fields in every record): pass --format rm-bench or --format rewardbench2"
    )
    with pytest.raises(InputError, match="fits both"):
        detect_format(local_rows(path))


def test_a_folder_is_detected_as_a_whole(tmp_path, capsys):
    write_json(tmp_path / "mixed" / "a.json", [lists(1, 3, num_correct=1)])
    write_json(tmp_path / "mixed" / "b.json", [lists(3, 3)])
    err = evaluate_error(tmp_path, tmp_path / "mixed", capsys)
    assert (
        "a.json: item 0: field 'chosen': has 1 answer where RM-Bench has 3 (one per style); "
        f"item 0 of {tmp_path / 'mixed' / 'b.json'} has none of RewardBench 2's fields" in err
    )


def test_detected_release_is_read_in_that_format(tmp_path):
    release = open_release(write_jsonl(tmp_path / "b.jsonl", [lists(3, 3), lists(3, 3)]))
    assert release.benchmark_format == "rm-bench" and len(release.pairwise) == 18


def test_format_option_settles_an_ambiguous_release(tmp_path):
    path = write_json(tmp_path / "styles.json", [lists(3, 3, subset="Math", num_correct=3)])
    # as RewardBench 2: one best-of-N item (chosen[0] against 2 other chosen and 3 rejected)
    as_rb2 = evaluate(tmp_path, path, "--format", "rewardbench2", out="rb2")
    assert as_rb2["benchmark"]["format"] == "rewardbench2" and as_rb2["bon"]["overall"]["n"] == 1
    # as RM-Bench: nine pairs; every chosen (1, 2, 3) beats every rejected (0)
    forced = evaluate(tmp_path, path, "--format", "rm-bench", out="forced")
    assert forced["benchmark"]["format"] == "rm-bench" and forced["pairwise"]["overall"]["n"] == 9
    assert (forced["benchmark"]["hard"], forced["benchmark"]["normal"], forced["benchmark"]["easy"]) == (1.0, 1.0, 1.0)
    assert forced["benchmark"]["headline"] is None  # one domain: RM-Bench averages over four


def test_rmb_layout_is_still_read_as_rmb(tmp_path):
    rel = Release(name="tiny", root=None)
    rel.add(
        PairwiseItem(
            "0", (Turn("user", "Hi"),), Answer("m1", "2|long"), Answer("m2", "1|short"), "Helpfulness/Chat/Discussion"
        )
    )
    write_release(rel, tmp_path / "rel")
    res = evaluate(tmp_path, tmp_path / "rel")
    assert "benchmark" not in res and res["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"]["accuracy"] == 1.0
    with pytest.raises(InputError, match="field 'prompt': missing"):
        open_release(tmp_path / "rel", "rewardbench")  # RMB's set files hold no benchmark records


def test_inputs_that_are_no_benchmark(tmp_path, capsys):
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "x.jsonl", [{"question": "q?"}]), capsys)
    assert "x.jsonl: not a benchmark: no record has prompt, chosen or rejected" in err  # not read as RewardBench
    err = evaluate_error(tmp_path, write_jsonl(tmp_path / "y.jsonl", [{"prompt": "q?", "chosen": "a"}]), capsys)
    assert (
        "y.jsonl: line 1: item 0: field 'rejected': missing (a benchmark record needs prompt, chosen, rejected)" in err
    )
    (tmp_path / "broken.jsonl").write_text('{"prompt": "q?"}\n{"prompt": \n')
    err = evaluate_error(tmp_path, tmp_path / "broken.jsonl", capsys)
    assert "broken.jsonl: line 2: invalid JSON" in err
    (tmp_path / "empty").mkdir()
    err = evaluate_error(tmp_path, tmp_path / "empty", capsys)
    assert "empty: holds no release or benchmark: no Pairwise_set/ or BoN_set/ folder" in err
    (tmp_path / "obj.json").write_text('{"prompt": "q?"}')
    err = evaluate_error(tmp_path, tmp_path / "obj.json", capsys)
    assert "obj.json: expected a JSON list of records, got dict" in err
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    err = evaluate_error(tmp_path, tmp_path / "bad.parquet", capsys)
    assert "bad.parquet: not a readable Parquet file" in err


@pytest.mark.torch
def test_a_hub_id_offline_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    err = evaluate_error(tmp_path, "nobody-here/no-such-benchmark", capsys)
    assert "nobody-here/no-such-benchmark: cannot load from the Hugging Face Hub" in err


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(RMBError, match="unknown format 'csv'"):
        open_release(write_jsonl(tmp_path / "b.jsonl", [lists(1, 1)]), "csv")
