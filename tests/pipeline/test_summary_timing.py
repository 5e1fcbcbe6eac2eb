"""``runs/<name>/summary.json``'s timings: every stage's seconds real (the label checks, which run
outside task batches, included) and a ``timing`` section whose figures add up to the run's elapsed time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from stub_endpoint import StubEndpoint

from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.run_state import RunState
from tests.pipeline.test_label_checks import HARMFUL_AS_HELPFUL, PLAIN, _config, _write_gold

EPS = 0.005  # the figures are rounded to milliseconds one by one


def test_timing_counts_overlapping_work_once(tmp_path):
    state = RunState(tmp_path)
    state.started = time.time() - 10
    now = time.time()
    state.add_work("judge", now - 9, 4)  # [1, 5] s into the run
    state.add_work("guard", now - 7, 4)  # [3, 7]: overlaps the judge for 2 s
    with state.timed("route") as rec:
        time.sleep(0.01)
    state.release_seconds = 1.0
    state.flush()
    t = json.loads((tmp_path / "summary.json").read_text())["timing"]
    assert (
        rec.seconds >= 0.01 and rec.spans and rec.spans[0][1] - rec.spans[0][0] == pytest.approx(rec.seconds, abs=1e-6)
    )
    assert t["stage_seconds_s"] == pytest.approx(8 + rec.seconds, abs=EPS)
    assert t["work_s"] == pytest.approx(6 + rec.seconds, abs=EPS)
    assert t["overlap_s"] == pytest.approx(2, abs=EPS)
    assert t["release_s"] == 1.0
    assert t["work_s"] + t["release_s"] + t["orchestration_s"] == pytest.approx(t["elapsed_s"], abs=EPS)


def test_timed_block_counts_even_when_it_fails(tmp_path):
    state = RunState(tmp_path)
    with pytest.raises(RuntimeError), state.timed("gold"):
        raise RuntimeError("below the agreement floor")
    assert len(state.stage("gold").spans) == 1 and len(state.spans) == 1


@pytest.mark.torch
def test_build_times_gold_and_route_and_its_timing_adds_up(tmp_path):
    from rmb_build.pipeline.run import run_local

    gold = _write_gold(tmp_path / "gold", 9, 3)
    with StubEndpoint() as stub:
        cfg = _config(tmp_path, stub.base_url, [PLAIN, HARMFUL_AS_HELPFUL])
        cfg["judge"]["gold"] = {"release": str(gold), "items": 8}
        out = run_local(parse_config(cfg), tmp_path / "work")
    summary = json.loads((Path(out["run"]) / "summary.json").read_text())
    stages = {s["stage"]: s for s in summary["stages"]}
    for name in ("gold", "route"):  # timed where they run, outside any task batch
        assert stages[name]["seconds"] > 0 and stages[name]["wall_seconds"] > 0 and stages[name]["batches"] == 0
    t = summary["timing"]
    assert (t["elapsed_s"], t["work_s"], t["release_s"]) == (
        summary["elapsed_s"],
        summary["work_s"],
        summary["release_seconds"],
    )
    assert 0 < t["work_s"] <= t["elapsed_s"] and t["release_s"] > 0 and t["orchestration_s"] >= 0
    assert t["work_s"] >= stages["gold"]["wall_seconds"] + stages["route"]["wall_seconds"] - EPS  # one after the other
    assert all(s["wall_seconds"] <= t["work_s"] + EPS for s in stages.values())
    assert t["stage_seconds_s"] == pytest.approx(sum(s["seconds"] for s in stages.values()), abs=EPS)
    assert t["stage_seconds_s"] + EPS >= t["work_s"]
    assert t["overlap_s"] == pytest.approx(t["stage_seconds_s"] - t["work_s"], abs=EPS)
    assert t["work_s"] + t["release_s"] + t["orchestration_s"] == pytest.approx(t["elapsed_s"], abs=EPS)
    print(
        json.dumps({"timing": t, "stages": {k: (s["seconds"], s["wall_seconds"]) for k, s in stages.items()}}, indent=1)
    )
