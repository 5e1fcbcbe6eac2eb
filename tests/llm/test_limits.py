"""One limit for every caller of a client (threads and event loops), and rpm/tpm token buckets (virtual clock)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from stub_endpoint import StubEndpoint

from rmb_build.llm import ChatRequest, LLMClient, limits
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.limits import RateLimiter


def _client(stub: StubEndpoint, tmp_path, **ep) -> LLMClient:
    return LLMClient({"stub": EndpointConfig(base_url=stub.base_url, **ep)}, tmp_path / "llm_cache", progress=False)


def _ask(text: str) -> ChatRequest:
    return ChatRequest("stub", "m", (("user", text),), max_tokens=4)


def test_threads_and_event_loops_share_one_limit(tmp_path):
    """Threads, each with its own event loop or none, all wait for the same endpoint slots."""
    with (
        StubEndpoint(reply=lambda body: "ok", delay_s=0.05) as stub,
        _client(stub, tmp_path, max_concurrency=2) as client,
    ):
        out: dict[str, list] = {}

        def in_loop(k: int) -> None:
            out[f"loop{k}"] = asyncio.run(client.chat_many([_ask(f"loop {k} item {i}") for i in range(4)]))

        def plain(k: int) -> None:
            out[f"sync{k}"] = client.run([_ask(f"sync {k} item {i}") for i in range(4)])

        threads = [threading.Thread(target=f, args=(k,)) for k in range(2) for f in (in_loop, plain)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(out) == 4 and all(r.ok for rs in out.values() for r in rs)
    assert len(stub.bodies) == 16 and stub.max_in_flight == 2


def test_a_cancelled_caller_passes_its_slot_on(tmp_path):
    """Cancelling a caller's batch (in its own loop) cancels it on the client's loop and frees its slot."""
    gate = threading.Event()  # the stub holds every reply until the test opens it

    def reply(body: dict) -> str:
        gate.wait(60)
        return "ok"

    with StubEndpoint(reply=reply) as stub, _client(stub, tmp_path, max_concurrency=1) as client:

        async def main() -> list:
            first = asyncio.create_task(client.chat_many([_ask(f"first {i}") for i in range(5)]))
            while not stub.bodies:
                await asyncio.sleep(0.01)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            nxt = asyncio.create_task(client.chat_many([_ask("next")]))
            while len(stub.bodies) < 2:
                await asyncio.sleep(0.01)
            gate.set()
            return await nxt

        results = asyncio.run(main())
    assert results[0].ok and results[0].text == "ok"
    # The cancelled batch's waiting requests were never sent; its slot went to the next caller.
    assert [b["messages"][0]["content"] for b in stub.bodies] == ["first 0", "next"]


@pytest.fixture
def clock(monkeypatch):
    """A virtual clock: asyncio.sleep inside limits advances it instead of waiting."""
    now = [1000.0]
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        now[0] += seconds
        await real_sleep(0)

    monkeypatch.setattr(limits.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(limits.asyncio, "sleep", fake_sleep)
    return now


def test_rpm_spaces_requests(clock):
    bucket = RateLimiter(per_minute=120)  # 2 a second, burst of 2
    stamps = []

    async def main() -> None:
        for _ in range(6):
            await bucket.acquire(1)
            stamps.append(clock[0] - 1000.0)

    asyncio.run(main())
    assert stamps[:2] == [0.0, 0.0]
    assert stamps[2:] == pytest.approx([0.5, 1.0, 1.5, 2.0])


def test_tpm_lets_a_big_request_through_then_waits_off_the_debt(clock):
    bucket = RateLimiter(per_minute=600)  # 10 tokens a second, burst of 10

    async def main() -> list[float]:
        out = []
        for amount in (50, 5, 5):
            await bucket.acquire(amount)
            out.append(clock[0] - 1000.0)
        return out

    times = asyncio.run(main())
    # Never refused, even above the burst; then 40 tokens of debt + 5 more at 10/s; then 5 more.
    assert times == pytest.approx([0.0, 4.5, 5.0])
    bucket.refund(3)  # a reply used 3 tokens fewer than estimated
    assert bucket.level == pytest.approx(3.0)
