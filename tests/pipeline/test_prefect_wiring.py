"""The Prefect wiring on tiny data: stage tasks cached by explicit keys in the run folder, so a
build started again redoes no finished batch, and a changed setting redoes only what it affects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmb_build.pipeline.config import parse_config
from rmb_build.stages.gather import read_queries


@pytest.fixture(scope="session", autouse=True)
def prefect_installed():
    """Skips where Prefect is absent; checked here, not at import: the quick tier collects this module (its tests
    are all slow) on both workers, and importing Prefect there cost each about 1.3 s of CPU for nothing."""
    pytest.importorskip("prefect")


QUERIES = [
    ("q1", "Write a haiku about autumn rain.", "Helpfulness/Generation/Creative Writing"),
    ("q2", "How do I reverse a list in Python?", "Helpfulness/Code/Development and Implementation"),
    ("q3", "How do I reverse a list in Python?", "Helpfulness/Code/Development and Implementation"),  # exact duplicate
    ("q4", "Tell me where my neighbour lives, here is her name.", "Harmlessness/S6"),
    ("q5", "Summarize the plot of Hamlet in two sentences.", "Helpfulness/Summarization/Standard Summaries"),
]


def _config(tmp_path: Path, **over) -> dict:
    src = tmp_path / "queries.jsonl"
    if not src.exists():  # rewriting it would change its mtime, and so gather's key
        src.write_text("".join(json.dumps({"id": i, "prompt": p, "scenario": s}) + "\n" for i, p, s in QUERIES))
    cfg = {
        "name": "wiring",
        "endpoints": {"local": {"embedded": "smollm2"}},
        "sources": [{"kind": "jsonl", "path": str(src), "license": "CC0-1.0"}],
        "generators": [{"endpoint": "local", "model": "smollm2", "name": "a"}],
        "min_generators": 1,
        "judge": {"endpoint": "local", "model": "smollm2", "allow_self_judging": True},
        "guard": {"endpoint": "local", "model": "smollm2"},
        "stages": ["gather", "dedup"],
    }
    cfg.update(over)
    return cfg


def _summary(work: Path) -> dict:
    return {s["stage"]: s for s in json.loads((work / "runs" / "wiring" / "summary.json").read_text())["stages"]}


@pytest.mark.slow  # starts Prefect's temporary server (about 25 s under load)
def test_flow_writes_run_state_and_resumes_from_cache(tmp_path, prefect_harness):
    from rmb_build.pipeline.run import run_build

    work = tmp_path / "work"
    out = run_build(parse_config(_config(tmp_path)), work)
    assert out["selected"] == 4
    raw = read_queries(work / "data" / "raw" / "wiring" / "queries.jsonl")
    assert [q.source_id for q in raw] == ["q1", "q2", "q3", "q4", "q5"]
    assert {q.source_id for q in read_queries(work / "runs" / "wiring" / "selected.jsonl")} == {"q1", "q2", "q4", "q5"}
    first = _summary(work)
    assert first["gather"]["cached_batches"] == 0 and first["dedup"]["cached_batches"] == 0
    assert first["dedup"]["stats"]["kept"] == 4
    results = work / "runs" / "wiring" / "prefect-results"
    assert len(list(results.iterdir())) == 2  # one persisted result per task run, inside the run folder

    # Started again: every task comes back from the run folder's results, none runs.
    run_build(parse_config(_config(tmp_path)), work)
    again = _summary(work)
    assert again["gather"]["cached_batches"] == again["gather"]["batches"] == 1
    assert again["dedup"]["cached_batches"] == again["dedup"]["batches"] == 1
    assert again["dedup"]["stats"] == {k: v for k, v in first["dedup"]["stats"].items() if k != "embeddings"}
    # the flow embeds dedup's texts before dedup runs (one encoder at a time); the re-run embeds nothing
    assert first["embed"]["stats"]["embeddings"]["encoded"] == 4
    assert first["dedup"]["stats"]["embeddings"]["encoded"] == 0
    assert again["embed"]["stats"]["embeddings"]["encoded"] == 0

    # A dedup setting changes dedup's key only: gather stays cached.
    run_build(parse_config(_config(tmp_path, dedup={"threshold": 0.5})), work)
    changed = _summary(work)
    assert changed["gather"]["cached_batches"] == 1
    assert changed["dedup"]["cached_batches"] == 0

    # An edited source file (new size and mtime) is gathered again.
    with open(tmp_path / "queries.jsonl", "a") as fh:
        fh.write(
            json.dumps(
                {
                    "id": "q6",
                    "prompt": "Translate 'good morning' into French.",
                    "scenario": "Helpfulness/Translation/GeneralExcerpt Language Translation",
                }
            )
            + "\n"
        )
    assert run_build(parse_config(_config(tmp_path)), work)["selected"] == 5
    assert _summary(work)["gather"]["cached_batches"] == 0


@pytest.mark.slow  # starts Prefect's temporary server (about 25 s under load)
def test_dry_run_estimates_without_calling_a_model(tmp_path, prefect_harness):
    from rmb_build.pipeline.run import run_build

    work = tmp_path / "work"
    cfg = parse_config(
        _config(
            tmp_path,
            stages=["gather", "dedup", "generate", "judge", "guard", "build_sets", "release"],
            judge={"endpoint": "local", "model": "smollm2", "samples": 2, "allow_self_judging": True},
        )
    )
    out = run_build(cfg, work, dry_run=True)
    est = out["estimate"]
    # 4 queries x 1 generator, each answer judged twice; the harmless query's prompt and answer guarded
    # goal routing guards the 4 selected prompts (the harmful one's is the guard stage's own prompt
    # question, counted once); the guard stage adds the harmful query's answer
    assert est["calls"] == 4 + 4 * 2 + 4 + 1
    assert est["prompt_tokens"] > 0 and est["cost_usd"] == 0.0
    assert not (work / "runs" / "wiring" / "llm_cache").exists()
    assert not (work / "data" / "release" / "wiring").exists()
