"""A build against an endpoint that hangs or trickles its replies ends: within its silence limit plus a
minute, in one line naming the endpoint, every reply received before kept; the same command resumes and
asks nothing answered before. (Before: still retrying after 402 s with 0 replies; 16 replies in 424 s.)"""

from __future__ import annotations

import re

import pytest
from reliability_helpers import (  # noqa: F401
    NAME,
    BuildProcess,
    CountingProxy,
    build_env,
    prefect_api,
    repeated_answers,
    run_build,
    write_config,
)
from stub_endpoint import StubEndpoint

pytestmark = pytest.mark.slow

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (INFO|WARNING) ")
SILENCE_S = 8


@pytest.mark.parametrize("runner,fault", [("local", "hang"), ("prefect", "trickle")])
def test_a_build_against_a_silent_endpoint_stops_in_one_line_and_resumes(tmp_path, prefect_api, runner, fault):
    args = ["--runner", "local"] if runner == "local" else []
    work = tmp_path / "work"
    proxy_faults = {"mix": (fault,), "fraction": 1.0, "max_faults_per_body": 10**6, "trickle_s": 1.0}
    with StubEndpoint() as stub, CountingProxy(stub.base_url, **proxy_faults) as proxy:
        config = write_config(tmp_path, proxy.url, deadline_s=2, silence_limit_s=SILENCE_S, max_retries=100)
        proxy.schedule(*[None] * 6)  # goal routing's guard calls and two generate calls are answered; then the fault
        run = BuildProcess(config, work, prefect_api, env=build_env(prefect_api), args=args)
        code = run.wait(SILENCE_S + 2 + 60 + 120)  # the limit, a try's deadline, a minute; and a start on 2 cores
        said = [ln for ln in run.output().splitlines() if ln.strip() and not LOG_LINE.match(ln)]
        assert code == 2, run.output()[-4000:]
        assert len(said) == 1, run.output()[-4000:]
        assert said[0].startswith(f"rmb build: error: endpoint 'proxy' ({proxy.url}) answered nothing for {SILENCE_S}s")
        assert "run the same command again to resume" in said[0]
        answered = proxy.snapshot()
        assert sum(answered.values()) == 6
        proxy.mix = ()
        run_build(config, work, prefect_api, env=build_env(prefect_api), args=args)
    assert repeated_answers(answered, proxy.snapshot()) == 0  # the resume asked nothing answered before
    assert (work / "data" / "release" / NAME / "Pairwise_set").is_dir()
