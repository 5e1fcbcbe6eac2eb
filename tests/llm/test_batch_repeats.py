"""A request asked twice in one batch is sent once: the cache would have answered the second, and a dry
run counts it once (two generators giving one answer make the same judge request)."""

from __future__ import annotations

from stub_endpoint import StubEndpoint

from rmb_build.llm import ChatRequest, LLMClient, PlanningClient
from rmb_build.llm.config import EndpointConfig


def test_repeated_requests_in_one_batch_are_sent_once(tmp_path):
    same = ChatRequest("stub", "judge", (("user", "Rate this answer."),), max_tokens=8, stage="judge", tag="a")
    other = ChatRequest("stub", "judge", (("user", "Rate that answer."),), max_tokens=8, stage="judge")
    batch = [same, other, same.__class__(**{**same.__dict__, "tag": "b"}), same]
    with StubEndpoint() as stub:
        eps = {"stub": EndpointConfig(base_url=stub.base_url)}
        with LLMClient(eps, tmp_path / "cache", progress=False) as client:
            results = client.run(batch)
            assert len(stub.bodies) == 2
            assert all(r.ok for r in results) and results[0].text == results[2].text == results[3].text
            assert [r.request.tag for r in results] == ["a", "", "b", "a"]
            assert not results[0].cached and results[2].cached and results[3].cached
            assert client.usage()["judge"]["judge"]["requests"] == 2
        planner = PlanningClient(eps)
        planner.plan(batch)
        assert planner.report()["calls"] == 2
