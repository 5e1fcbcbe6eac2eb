"""Hostile endpoints end: a reply trickled a byte at a time is cut at the request's total deadline (a per-read
timeout restarts with each byte); an endpoint that answers nothing stops the batch in one line naming it, with
every reply received before cached; a reply body over ``max_reply_bytes`` is refused before the cache.

Against the scripted stub behind the fault proxy (``tests/helpers``): quick."""

from __future__ import annotations

import pytest
from fault_proxy import FaultProxy
from stub_endpoint import StubEndpoint

from rmb_build.llm import ChatRequest, LLMClient
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.silence import EndpointSilent


def ask(i: int) -> ChatRequest:
    return ChatRequest("slow", "strong", (("user", f"Question {i}?"),), max_tokens=12, stage="generate")


@pytest.fixture
def proxy():
    with StubEndpoint() as stub, FaultProxy(stub.base_url, trickle_s=0.3, huge_bytes=300_000) as p:
        yield p


def client_for(proxy: FaultProxy, tmp_path, **ep) -> LLMClient:
    cfg = EndpointConfig(base_url=proxy.url, structured_output="json_object", max_concurrency=2, **ep)
    return LLMClient({"slow": cfg}, tmp_path / "llm_cache", retry_base_s=0.05, retry_max_s=0.1, progress=False)


def test_a_trickled_reply_is_cut_at_the_deadline_and_retried(proxy, tmp_path):
    proxy.schedule("trickle", "trickle")  # two tries trickle (a reply of ~300 bytes: minutes); the third passes
    with client_for(proxy, tmp_path, timeout_s=5, deadline_s=0.8, max_retries=3) as client:
        result = client.run([ask(0)])[0]
        assert result.ok and result.attempts == 3, result.error
        assert client.usage()["generate"]["strong"]["retries"] == 2
    with client_for(proxy, tmp_path, timeout_s=5, deadline_s=0.8, max_retries=0) as client:
        proxy.schedule("trickle")
        failed = client.run([ask(1)])[0]
    assert failed.error == "gave up after 1 attempts: no whole reply within deadline_s 0.8s"


@pytest.mark.parametrize("fault", ["hang", "trickle"])
def test_an_endpoint_that_answers_nothing_stops_the_batch_naming_it_and_keeps_the_answers(proxy, tmp_path, fault):
    reqs = [ask(i) for i in range(6)]
    proxy.schedule(None, None)  # two answers, then nothing but the fault
    proxy.set_fault(fault)
    with client_for(proxy, tmp_path, deadline_s=0.5, silence_limit_s=1.5, max_retries=100) as client:
        with pytest.raises(EndpointSilent) as stopped:
            client.run(reqs)
    line = str(stopped.value)
    assert "\n" not in line and line.startswith(f"endpoint 'slow' ({proxy.url}) answered nothing for 1.5s")
    assert "no whole reply within deadline_s 0.5s" in line and "run the same command again to resume" in line
    assert proxy.chat_forwarded() - proxy.injected["trickle"] == 2  # answered whole (a trickle is forwarded)
    proxy.set_fault(None)
    proxy.reset_counts()
    with client_for(proxy, tmp_path) as client:
        results = client.run(reqs)
    assert all(r.ok for r in results) and sum(r.cached for r in results) == 2
    assert proxy.chat_forwarded() == 4  # only the unanswered requests are asked again


@pytest.mark.parametrize("fault", ["huge", "huge_chunked"])
def test_a_reply_over_max_reply_bytes_is_refused_and_never_cached(proxy, tmp_path, fault):
    proxy.set_fault(fault)
    with client_for(proxy, tmp_path, max_reply_bytes=100_000, max_retries=3) as client:
        result = client.run([ask(0)])[0]
        assert result.error is not None and "over max_reply_bytes 100000: refused" in result.error, result.error
        assert result.attempts == 1  # the same request would be as large again
    proxy.set_fault(None)
    with client_for(proxy, tmp_path) as client:  # a normal reply of the same request passes: nothing was cached
        again = client.run([ask(0)])[0]
    assert again.ok and not again.cached
