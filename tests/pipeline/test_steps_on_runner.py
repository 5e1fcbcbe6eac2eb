"""Every step of the build is a stage the runner runs (issue 39): harm evidence, selection, the gold check
and goal routing go through the one runner step like the batch stages, in the order of ``STAGES``."""

from __future__ import annotations

import asyncio

import pytest
from stub_endpoint import StubEndpoint

from rmb_build.core.paths import BuildPaths
from rmb_build.pipeline.build import run_pipeline
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.runner import LocalRunner
from rmb_build.pipeline.stages import STAGES
from tests.pipeline.test_label_checks import HARMFUL_AS_HELPFUL, PLAIN, _config, _write_gold


class _Seen(LocalRunner):
    """The local runner, noting each stage it is asked to run (``submit`` goes through ``call``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def call(self, spec, key, env, inputs):
        self.seen.append(spec.name)
        return super().call(spec, key, env, inputs)

    async def acall(self, spec, key, env, inputs):
        self.seen.append(spec.name)
        return await super().acall(spec, key, env, inputs)


@pytest.mark.torch
def test_every_step_of_a_build_with_gold_and_routing_goes_through_the_runner_in_stage_order(tmp_path):
    gold = _write_gold(tmp_path / "gold", 9, 3)
    with StubEndpoint() as stub:
        raw = _config(tmp_path, stub.base_url, [PLAIN, HARMFUL_AS_HELPFUL])
        raw["judge"]["gold"] = {"release": str(gold), "items": 8}
        cfg = parse_config(raw)
        runner = _Seen(BuildPaths.of(cfg.name, tmp_path / "work").batch_results)
        try:
            out = asyncio.run(run_pipeline(cfg, runner, tmp_path / "work"))
        finally:
            runner.close()
    assert out["release"]
    steps = list(dict.fromkeys(runner.seen))
    assert {"harm_evidence", "select", "gold", "route"} <= set(steps), steps
    order = [s.name for s in STAGES]
    assert steps == sorted(steps, key=order.index), steps  # met in the build's order
