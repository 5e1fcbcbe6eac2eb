"""Bad input, both policies, at the level users meet them.

Exact inputs (a release to evaluate, audit or publish; a build config): the command exits 2 with one
line on stderr naming the file, item and field, no traceback, and writes no partial output. Raw
sources for gather (tests/commands/bad_inputs/raw/): bad records are skipped, written with the reason to the
quarantine file and counted in the run summary. A 5 MB answer is valid input, not a crash.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmb_build.cli import main
from rmb_build.core.errors import InputError
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.release_step import release_of
from rmb_build.release.hf import data_file, read_hf_release
from rmb_build.release.write import write_release
from rmb_build.stages.gather import gather
from rmb_build.stages.options import source_config

CORPUS = Path(__file__).parent / "bad_inputs"
RAW = CORPUS / "raw"

# line -> quarantine reason, for tests/commands/bad_inputs/raw/messy.jsonl
MESSY_QUARANTINED = {
    2: "invalid JSON",
    3: "field 'prompt' is not a string",
    4: "empty conversation",
    6: "messages[0]: content is not a string",
    7: "messages[0]: unknown role 'bot'",
    8: "'Helpfulness/Chat/Gossip' is not one of the 49 scenario ids",
    9: "'../../etc/passwd' is not one of the 49 scenario ids",
    10: "record is a list, not an object",
    12: "invalid UTF-8",
    13: "invalid JSON: Unterminated string",  # the file is cut off inside its last record
}
# element index -> reason, for tests/commands/bad_inputs/raw/sharegpt_cut_off.json (cut off inside record 7)
SHAREGPT_QUARANTINED = {1: "empty conversation", 3: "content is not a string", 4: "not a list of turns"}


def _items(answer: str = "Paris is the capital of France.") -> list:
    conv = (Turn("user", "What is the capital of France?", "English"),)
    return [
        PairwiseItem("0", conv, Answer("m1", answer), Answer("m2", "London."), "Helpfulness/Open QA/Factual"),
        BonItem(
            "0",
            conv,
            Answer("m1", answer),
            (Answer("m2", "London."), Answer("m3", "Rome.")),
            "Helpfulness/Open QA/Factual",
        ),
    ]


def _release(tmp_path: Path, answer: str | None = None) -> Path:
    root = tmp_path / "good"
    write_release(release_of("good", _items(*([answer] if answer else []))), root)
    return root


# ---- raw sources: quarantine ------------------------------------------------------------------------


def test_messy_jsonl_is_quarantined_record_by_record(tmp_path):
    out = gather([source_config(kind="jsonl", path=str(RAW / "messy.jsonl"))], quarantine_path=tmp_path / "q.jsonl")
    assert [q.source_id for q in out.queries] == ["ok1", "endsassistant", "ok2"]
    # a conversation ending with an assistant turn is cut to its last user turn, as RMB's are
    assert [t.role for t in out.queries[1].conversation] == ["user"]
    entries = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert {e["where"] for e in entries} == set(MESSY_QUARANTINED)
    for e in entries:
        assert MESSY_QUARANTINED[e["where"]] in e["reason"], e
        assert e["source"] == "jsonl:messy.jsonl" and "record" in e
    stats = out.stats["jsonl:messy.jsonl"]
    assert stats["quarantined"] == len(MESSY_QUARANTINED) and stats["kept"] == 3
    assert stats["read"] == stats["kept"] + stats["filtered"] + stats["quarantined"]


def test_cut_off_sharegpt_is_read_to_its_last_whole_record(tmp_path):
    out = gather(
        [source_config(kind="sharegpt", path=str(RAW / "sharegpt_cut_off.json"))], quarantine_path=tmp_path / "q.jsonl"
    )
    assert [q.source_id for q in out.queries] == ["g1", "g6", "g7"]
    stats = out.stats["sharegpt:sharegpt_cut_off.json"]
    assert stats["incomplete_tail"] > 0  # the cut-off record is reported, not silently dropped
    assert stats["filtered"] == 1  # g3 starts with the assistant: well-formed, filtered out
    entries = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert {e["where"]: e["reason"] for e in entries}.keys() == SHAREGPT_QUARANTINED.keys()
    for e in entries:
        assert SHAREGPT_QUARANTINED[e["where"]] in e["reason"]


def test_build_counts_quarantined_records_in_its_summary(tmp_path):
    from rmb_build.pipeline.run import run_local

    cfg = parse_config(
        {
            "name": "messy",
            "endpoints": {"local": {"embedded": "smollm2"}},
            "sources": [
                {"kind": "jsonl", "path": str(RAW / "messy.jsonl")},
                {"kind": "sharegpt", "path": str(RAW / "sharegpt_cut_off.json")},
            ],
            "generators": [{"endpoint": "local", "model": "smollm2"}],
            "judge": {"endpoint": "local", "model": "smollm2"},
            "guard": {"endpoint": "local", "model": "smollm2"},
            "stages": ["gather"],
        }
    )
    run_local(cfg, tmp_path)
    summary = json.loads((tmp_path / "runs" / "messy" / "summary.json").read_text())
    gathered = next(s for s in summary["stages"] if s["stage"] == "gather")["stats"]
    assert sum(s["quarantined"] for s in gathered.values()) == len(MESSY_QUARANTINED) + len(SHAREGPT_QUARANTINED)
    assert sum(s["kept"] for s in gathered.values()) == 6
    quarantine = (tmp_path / "data" / "raw" / "messy" / "quarantine.jsonl").read_text().splitlines()
    assert len(quarantine) == len(MESSY_QUARANTINED) + len(SHAREGPT_QUARANTINED)


# ---- exact inputs: one line, exit 2, nothing written ------------------------------------------------


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


def _bad_release(tmp_path: Path, name: str, place: str) -> Path:
    root = tmp_path / "bad"
    target = root / place
    target.parent.mkdir(parents=True)
    shutil.copy(CORPUS / "release" / name, target)
    return root


BAD_RELEASES = [
    ("truncated_json.json", "Pairwise_set/Helpfulness/Chat/Discussion.json", "truncated JSON"),
    ("non_string_content.json", "Pairwise_set/Helpfulness/Chat/Discussion.json", "conversation_input[0].content"),
    ("bon_no_losers.json", "BoN_set/Harmlessness/S1.json", "item 0 (uid 7): field 'loser_list': empty"),
]


@pytest.mark.parametrize("name,place,expected", BAD_RELEASES, ids=[c[0] for c in BAD_RELEASES])
@pytest.mark.parametrize("command", ["evaluate", "audit", "publish"])
def test_commands_reject_a_bad_release_in_one_line(tmp_path, capsys, command, name, place, expected):
    release, out = _bad_release(tmp_path, name, place), tmp_path / "out"
    argv = {
        "evaluate": [
            "evaluate",
            "--release",
            str(release),
            "--rm",
            "baseline:length",
            "--out",
            str(out),
            "--workdir",
            str(tmp_path),
        ],
        "audit": ["audit", str(release), "--json", str(out / "audit.json")],
        "publish": [
            "publish",
            str(release),
            "--repo-id",
            "org/name",
            "--license",
            "mit",
            "--dry-run",
            "--out",
            str(out),
        ],
    }[command]
    code, err = _cli(capsys, *argv)
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert place in err and expected in err, err
    assert not out.exists() or not any(out.rglob("*")), list(out.rglob("*"))


@pytest.mark.parametrize("path", sorted((CORPUS / "config").glob("*.yaml")), ids=lambda p: p.stem)
def test_build_rejects_a_bad_config_in_one_line(tmp_path, capsys, path):
    code, err = _cli(capsys, "build", "--config", str(path), "--workdir", str(tmp_path))
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err and str(path) in err, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "data").exists()


@pytest.mark.torch
def test_hf_form_with_an_escaping_scenario_is_rejected(tmp_path, capsys):
    hf = tmp_path / "hf"
    code, err = _cli(
        capsys,
        "publish",
        str(_release(tmp_path)),
        "--repo-id",
        "org/good",
        "--license",
        "mit",
        "--dry-run",
        "--out",
        str(hf),
        "--no-embeddings",
    )
    assert code == 0, err
    shard = hf / data_file("pairwise")
    table = pq.read_table(shard)
    table = table.set_column(
        table.schema.get_field_index("scenario"), "scenario", [["../../outside/Discussion"] * table.num_rows]
    )
    pq.write_table(table, shard)
    with pytest.raises(InputError) as exc:
        read_hf_release(str(hf))
    assert "field 'scenario'" in str(exc.value) and "item 0" in str(exc.value)
    out = tmp_path / "out"
    code, err = _cli(
        capsys,
        "evaluate",
        "--release",
        str(hf),
        "--rm",
        "baseline:length",
        "--out",
        str(out),
        "--workdir",
        str(tmp_path),
    )
    # datasets' own progress bars may precede it; the error itself is one line
    errors = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "item 0: field 'scenario'" in errors[0] and "not a safe relative path" in errors[0], err
    assert not (tmp_path / "outside").exists() and not (out.exists() and any(out.rglob("*")))


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_a_5mb_answer_is_valid_input(tmp_path, capsys):
    release = _release(tmp_path, "word " * (1 << 20))  # 5 MiB
    out = tmp_path / "out"
    code, err = _cli(
        capsys,
        "evaluate",
        "--release",
        str(release),
        "--rm",
        "baseline:length",
        "--out",
        str(out),
        "--workdir",
        str(tmp_path),
        "--bootstrap",
        "10",
    )
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["pairwise"]["overall"]["n"] == 1 and results["bon"]["overall"]["n"] == 1
    code, err = _cli(capsys, "audit", str(release), "--json", str(tmp_path / "audit.json"), "--no-embeddings")
    assert code == 0, err
