"""A stage runs where its spec says (``StageSpec.at``, a ``Position``): a toy stage at each position (on queries,
on answers, on items, once over the whole run), each one module in ``tests/helpers/`` and one line in the
ordered list, runs through the build's one step on both runners and in the dry run; a stage listed that
declares no position is refused by preflight in one line."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

import pytest
import toy_on_items
import toy_on_queries
import toy_on_run
import toy_stage
from reliability_helpers import build_config, write_queries
from stub_endpoint import StubEndpoint

from rmb_build.core.errors import ConfigError
from rmb_build.pipeline import stages
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.preflight import preflight
from rmb_build.pipeline.set_parts import part_path
from rmb_build.release.load import read_release
from rmb_build.stages.spec import Position

# each toy's one line: the stage it goes in after
AFTER = {
    toy_on_run.SPEC: "route",
    toy_on_queries.SPEC: "count_run",
    toy_stage.SPEC: "generate",
    toy_on_items.SPEC: "build_sets",
}
LISTED = ["gather", "count_run", "mark", "generate", "sign", "judge", "guard", "build_sets", "tally", "release"]


def _add(monkeypatch, spec, after: str) -> None:
    at = [s.name for s in stages.STAGES].index(after) + 1
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES[:at], spec, *stages.STAGES[at:]))


@pytest.fixture
def with_toys(monkeypatch):
    for spec, after in AFTER.items():
        _add(monkeypatch, spec, after)
    for toy in (toy_on_queries, toy_on_items, toy_on_run):
        monkeypatch.setattr(toy, "SEEN", [])


def _build(tmp_path: Path, runner: str, dry_run: bool = False, stub: StubEndpoint | None = None) -> tuple[dict, dict]:
    from rmb_build.pipeline.run import run_build

    with StubEndpoint() if stub is None else contextlib.nullcontext(stub) as stub:
        raw = build_config(write_queries(tmp_path / "queries.jsonl"), stub.base_url)
        raw["stages"] = LISTED
        stub.reset()
        out = run_build(parse_config(raw), tmp_path / "work", runner=runner, dry_run=dry_run)
        sent = len(stub.bodies)
    summary = json.loads((Path(out["run"]) / "summary.json").read_text())
    return {**out, "sent": sent}, {s["stage"]: s for s in summary["stages"]}


def _check(out: dict, summary: dict) -> None:
    assert summary["count_run"]["batches"] == 1 and summary["count_run"]["stats"]["counted"] == 4  # once, 4 queries
    assert summary["mark"]["batches"] == 2 and summary["mark"]["stats"]["marked"] == 4  # per batch of 2
    assert summary["sign"]["batches"] == 2 and summary["sign"]["stats"]["signed"] == 8
    tallied = summary["tally"]["stats"]["tallied"]
    assert (
        summary["tally"]["batches"] == 2
        and tallied == out["counts"]["items"]["pairwise"] + out["counts"]["items"]["bon"]
    )
    items = list(read_release(out["release"]).items())
    assert items and all(it.conversation[-1].content.endswith(toy_on_queries.MARK) for it in items)  # before generate
    assert all(a.answer.endswith(toy_stage.SIGNATURE) for it in items for a in it.answers())  # after generate
    sets_dir = Path(out["run"]) / "sets"
    kept = [json.loads(line) for b in (0, 1) for line in part_path(sets_dir, b, "tally").read_text().splitlines()]
    assert len(kept) == tallied  # the records of a stage on items, beside the batch's sets


@pytest.mark.slow  # a stub build: over 4 s under load
def test_toy_stages_at_every_position_run_on_the_local_runner(tmp_path, with_toys):
    _check(*_build(tmp_path, "local"))
    assert toy_on_run.SEEN == [4] and toy_on_queries.SEEN == [2, 2] and sum(toy_on_items.SEEN) > 0


@pytest.mark.slow
def test_toy_stages_at_every_position_run_on_prefect(tmp_path, with_toys, prefect_harness):
    _check(*_build(tmp_path, "prefect"))


@pytest.mark.slow
def test_the_dry_run_plans_the_toy_stages_through_the_build_s_step(tmp_path, with_toys):
    plan, _ = _build(tmp_path, "local", dry_run=True)
    assert plan["dry_run"] and plan["sent"] == 0
    # nothing cached: the stages on queries and over the run take their steps; no batch's sets are known
    assert toy_on_run.SEEN == [4] and toy_on_queries.SEEN == [2, 2] and toy_on_items.SEEN == []
    with StubEndpoint() as stub:  # one endpoint: the build's replies are the plan's cache
        _build(tmp_path, "local", stub=stub)
        toy_on_items.SEEN.clear()
        again, _ = _build(tmp_path, "local", dry_run=True, stub=stub)
    assert again["sent"] == 0 and len(toy_on_items.SEEN) == 2  # every reply cached: each batch's sets known


def test_a_listed_stage_with_no_position_is_refused_by_preflight_in_one_line(tmp_path, monkeypatch):
    _add(monkeypatch, dataclasses.replace(toy_stage.SPEC, at=None), "generate")
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), "http://127.0.0.1:9/v1")
    raw["stages"] = ["gather", "generate", "sign", "judge"]
    with pytest.raises(ConfigError) as caught:
        preflight(parse_config(raw), "build.yaml")
    assert "\n" not in str(caught.value) and "'sign' has no position to run at" in str(caught.value)
    assert str(caught.value).startswith("build.yaml: field 'stages': ")


@pytest.mark.parametrize("position", [Position.POOL, Position.SETS])
def test_a_listed_stage_at_a_position_without_a_step_and_no_hook_is_refused_by_preflight(
    tmp_path, monkeypatch, position
):
    """Over the pool and at the sets a stage runs only through its hook (``on_run``, ``on_batch``)."""
    _add(monkeypatch, dataclasses.replace(toy_stage.SPEC, at=position), "generate")
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), "http://127.0.0.1:9/v1")
    raw["stages"] = ["gather", "generate", "sign", "judge"]
    with pytest.raises(ConfigError) as caught:
        preflight(parse_config(raw), "build.yaml")
    assert "\n" not in str(caught.value)
    assert f"'sign' has no way to run at {position.value}: its StageSpec sets no hook (on_run or on_batch)" in str(
        caught.value
    )


def test_a_stage_on_queries_that_drops_one_is_refused_naming_it():
    """The accounting counts each selected query once: a stage on queries (or over the run) rewrites, never drops."""
    from rmb_build.core.errors import RMBError
    from rmb_build.pipeline.build import _same_queries
    from rmb_build.stages.spec import StageResult

    with pytest.raises(RMBError, match="stage 'mark' at queries: got 2 queries, returned 1"):
        _same_queries(toy_on_queries.SPEC, ["q1", "q2"], StageResult(records=["q1"]))
    assert _same_queries(toy_on_queries.SPEC, ["q1", "q2"], StageResult(records=["a", "b"])) == ["a", "b"]
