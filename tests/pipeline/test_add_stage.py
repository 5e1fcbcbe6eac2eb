"""Adding a stage is one new file and one line: the toy stage (``tests/helpers/toy_stage.py``) put in the
ordered list runs in every batch's chain on both runners, its batches counted, timed and cached like
every other stage's, and the release holds what it made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import toy_stage
from reliability_helpers import build_config, write_queries
from stub_endpoint import StubEndpoint

from rmb_build.pipeline import stages
from rmb_build.pipeline.config import parse_config
from rmb_build.release.load import read_release


@pytest.fixture
def with_toy_stage(monkeypatch):
    """The recipe's one line: the toy stage's spec in the ordered list, after ``generate``."""
    at = [s.name for s in stages.STAGES].index("generate") + 1
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES[:at], toy_stage.SPEC, *stages.STAGES[at:]))


def _build(tmp_path: Path, runner: str) -> tuple[dict, dict]:
    from rmb_build.pipeline.run import run_build

    with StubEndpoint() as stub:
        raw = build_config(write_queries(tmp_path / "queries.jsonl"), stub.base_url)
        raw["stages"] = ["gather", "generate", toy_stage.SPEC.name, "judge", "guard", "build_sets", "release"]
        out = run_build(parse_config(raw), tmp_path / "work", runner=runner)
    summary = json.loads((Path(out["run"]) / "summary.json").read_text())
    return out, {s["stage"]: s for s in summary["stages"]}


def _check(out: dict, summary: dict) -> None:
    sign = summary[toy_stage.SPEC.name]
    assert sign["batches"] == 2 and sign["stats"]["signed"] == 8  # 4 queries x 2 generators, batches of 2
    answers = [a.answer for it in read_release(out["release"]).items() for a in it.answers()]
    assert answers and all(a.endswith(toy_stage.SIGNATURE) for a in answers)


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_a_toy_stage_runs_on_the_local_runner(tmp_path, with_toy_stage):
    out, summary = _build(tmp_path, "local")
    _check(out, summary)
    _, again = _build(tmp_path, "local")
    assert again[toy_stage.SPEC.name]["cached_batches"] == 2  # its batches kept under their key


@pytest.mark.slow
def test_a_toy_stage_runs_on_prefect(tmp_path, with_toy_stage, prefect_harness):
    _check(*_build(tmp_path, "prefect"))


def test_without_the_line_the_config_refuses_the_stage(tmp_path):
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), "http://127.0.0.1:9/v1")
    raw["stages"] = ["gather", "generate", toy_stage.SPEC.name]
    with pytest.raises(Exception, match="unknown stage 'sign'"):
        parse_config(raw)
