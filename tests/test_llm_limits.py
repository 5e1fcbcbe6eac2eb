"""Concurrency slots shared across event loops and threads, and rpm/tpm token buckets (virtual clock)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rmb_build.llm import limits
from rmb_build.llm.limits import RateLimiter, SharedSemaphore


def test_shared_semaphore_bounds_several_loops():
    sem = SharedSemaphore(2)
    state = {"now": 0, "max": 0}
    lock = threading.Lock()

    async def worker() -> None:
        async with sem:
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            await asyncio.sleep(0.01)
            with lock:
                state["now"] -= 1

    async def batch() -> None:
        await asyncio.gather(*(worker() for _ in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(batch(),)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert state == {"now": 0, "max": 2}
    assert sem._value == 2 and not sem._waiters


def test_cancelled_waiter_passes_its_slot_on():
    async def main() -> None:
        sem = SharedSemaphore(1)
        await sem.acquire()
        waiter = asyncio.create_task(sem.acquire())
        nxt = asyncio.create_task(sem.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        sem.release()
        await asyncio.wait_for(nxt, 5)  # the slot went to the next waiter, not lost with the cancelled one
        with pytest.raises(asyncio.CancelledError):
            await waiter
        sem.release()
        assert sem._value == 1

    asyncio.run(main())


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
