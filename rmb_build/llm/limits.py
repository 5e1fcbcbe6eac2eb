"""Concurrency and rate limits shared by every event loop of a client.

A build may call one LLMClient from several threads (each with its own event loop, e.g. Prefect's
thread task runner); an asyncio.Semaphore belongs to one loop, so the limits here are guarded by
threading locks and wake waiters on their own loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque


class SharedSemaphore:
    """An asyncio semaphore that several event loops (threads) may share; FIFO."""

    def __init__(self, value: int):
        if value < 1:
            raise ValueError("a semaphore needs at least one slot")
        self._value = value
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = deque()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._value > 0 and not self._waiters:
                self._value -= 1
                return
            entry = (loop, loop.create_future())
            self._waiters.append(entry)
        try:
            await entry[1]
        except asyncio.CancelledError:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                    raise
            if entry[1].done() and not entry[1].cancelled():
                self.release()  # granted just as we were cancelled: pass the slot on
            raise

    def _grant(self, fut: asyncio.Future) -> None:
        if fut.cancelled():
            self.release()
        else:
            fut.set_result(None)

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, fut = self._waiters.popleft()
                if not loop.is_closed():
                    loop.call_soon_threadsafe(self._grant, fut)
                    return
            self._value += 1

    async def __aenter__(self) -> "SharedSemaphore":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()


class RateLimiter:
    """A token bucket refilled at ``per_minute / 60`` per second holding at most ``burst_s`` seconds' worth.

    ``acquire(n)`` waits while the bucket holds less than ``min(n, capacity)``, then takes ``n``
    (it may go into debt: one large request is never refused, the next ones wait until it is paid
    off). ``refund`` gives back what an estimate over-counted.
    """

    def __init__(self, per_minute: float, burst_s: float = 1.0):
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float = 1.0) -> None:
        need = min(amount, self.capacity)
        while True:
            with self._lock:
                self._refill()
                if self.level >= need:
                    self.level -= amount
                    return
                wait = (need - self.level) / self.rate
            await asyncio.sleep(wait)

    def refund(self, amount: float) -> None:
        with self._lock:
            self._refill()
            self.level = min(self.capacity, self.level + amount)
