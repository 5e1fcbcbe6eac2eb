"""Faults between the client and the real SmolLM2 server, injected by tests/helpers/fault_proxy.py.

The client retries what is worth retrying, honours Retry-After, finally fails cleanly with the
reason recorded in ChatResult.error, and keeps (in the cache) everything it already received.
"""

from __future__ import annotations

import pytest
from fault_proxy import FaultProxy

from rmb_build.llm import ChatRequest, LLMClient
from rmb_build.llm.config import EndpointConfig

pytestmark = pytest.mark.slow

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def ask(text: str, **kw) -> ChatRequest:
    kw.setdefault("max_tokens", 4)
    return ChatRequest("proxy", "smollm2", (("user", text),), **kw)


@pytest.fixture
def proxy(embedded_server):
    with FaultProxy(embedded_server.base_url, retry_after_s=1.0, stall_s=20) as p:
        yield p


def client_for(proxy, tmp_path, **ep) -> LLMClient:
    ep.setdefault("max_retries", 3)
    cfg = EndpointConfig(base_url=proxy.url, structured_output="json_object", **ep)
    return LLMClient({"proxy": cfg}, tmp_path / "llm_cache", retry_base_s=0.05, retry_max_s=0.2, progress=False)


@pytest.mark.parametrize("fault", ["429", "500", "503", "reset", "truncate", "malformed"])
def test_transient_faults_are_retried(proxy, tmp_path, fault):
    proxy.schedule(fault, fault)
    with client_for(proxy, tmp_path, outage_limit_s=30) as client:
        result = client.run([ask(f"Say {fault}.")])[0]
        assert result.ok, result.error
        assert result.attempts == 3 and proxy.injected[fault] == 2
        assert client.usage()[""]["smollm2"]["retries"] == 2


def test_retry_after_is_honoured(proxy, tmp_path):
    proxy.schedule("429_retry_after")
    with client_for(proxy, tmp_path) as client:
        result = client.run([ask("Hello.")])[0]
    assert result.ok and result.attempts == 2
    (t_429, _, fault), (t_ok, _, _) = proxy.requests
    # Backoff alone would wait at most retry_max_s = 0.2 s; the server asked for 1 s.
    assert fault == "429_retry_after" and t_ok - t_429 >= 0.95


def test_a_stalled_reply_times_out_and_is_retried(proxy, tmp_path):
    proxy.schedule("stall")
    with client_for(proxy, tmp_path, timeout_s=6) as client:  # above a real reply's time on a busy machine
        result = client.run([ask("Hello there.")])[0]
    assert result.ok and result.attempts == 2 and proxy.injected["stall"] == 1


def test_final_failure_is_recorded_and_nothing_else_is_lost(proxy, tmp_path):
    reqs = [ask("First."), ask("Second."), ask("Third.")]
    with client_for(proxy, tmp_path, max_concurrency=1) as client:
        good = client.run(reqs[:2])
        assert all(r.ok for r in good) and proxy.chat_forwarded() == 2
        proxy.set_fault("503")
        results = client.run(reqs)
    # The two answers already received come from the cache; the third fails with its reason.
    assert [r.cached for r in results[:2]] == [True, True] and [r.text for r in results[:2]] == [r.text for r in good]
    failed = results[2]
    assert not failed.ok and failed.text is None and failed.attempts == 4
    assert "gave up after 4 attempts" in failed.error and "HTTP 503" in failed.error
    assert proxy.chat_forwarded() == 2
    proxy.set_fault(None)
    with client_for(proxy, tmp_path, max_concurrency=1) as client:
        assert client.run(reqs)[2].ok  # failures were not cached as answers
    assert proxy.chat_forwarded() == 3


def test_non_retryable_status_fails_at_once(proxy, tmp_path):
    with client_for(proxy, tmp_path) as client:
        # llama_cpp.server rejects a json_schema response_format (HTTP 500 here) - but a bad
        # model name on a real API is a 404: use the proxy's own 404 for an unknown path.
        client.endpoints["proxy"] = EndpointConfig(base_url=proxy.url + "/nowhere", max_retries=3)
        result = client.run([ask("Hi.")])[0]
    assert not result.ok and result.attempts == 1 and "HTTP 404" in result.error


def test_schema_violations_are_reasked_then_recorded(proxy, tmp_path):
    judge = ask("Rate '2+2=4' from 1 to 10 in JSON.", response_schema=SCHEMA, max_tokens=10, stage="judge")
    proxy.schedule("bad_schema")
    with client_for(proxy, tmp_path) as client:
        result = client.run([judge])[0]
    assert result.ok, result.error
    assert isinstance(result.parsed["score"], int) and result.attempts == 2
    assert result.raw_texts[0] == proxy.bad_reply

    other = ask("Rate '3+3=6' from 1 to 10 in JSON.", response_schema=SCHEMA, max_tokens=10, max_reasks=1)
    proxy.set_fault("bad_schema")
    with client_for(proxy, tmp_path) as client:
        failed = client.run([other])[0]
        assert not failed.ok and "after 1 re-asks" in failed.error and "'score' is a required property" in failed.error
        assert failed.attempts == 2 and proxy.chat_forwarded() == 4
        # Every reply received was paid for and is kept: a re-run replays them without a request.
        again = client.run([other])[0]
    assert again.error == failed.error and again.attempts == 0 and proxy.chat_forwarded() == 4


def test_outage_is_waited_out_up_to_the_limit(proxy, tmp_path):
    with client_for(proxy, tmp_path, outage_limit_s=30) as client:
        proxy.take_away(1.5)
        result = client.run([ask("Are you back?")])[0]
        assert result.ok, result.error
        assert result.attempts >= 2
    with client_for(proxy, tmp_path, outage_limit_s=0.5) as client:
        proxy.take_away(20)
        result = client.run([ask("Anyone there?")])[0]
    assert not result.ok and result.error.startswith("endpoint unreachable for over 0.5s: cannot connect")
