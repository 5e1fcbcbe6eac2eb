"""Requests-per-minute and tokens-per-minute limits for one event loop (asyncio token buckets)."""

from __future__ import annotations

import asyncio
import time


class RateLimiter:
    """A token bucket refilled at ``per_minute / 60`` per second holding at most ``burst_s`` seconds' worth.

    ``acquire(n)`` waits while the bucket is in debt, then takes ``n`` (it may go into debt: one
    large request is never refused, the next ones wait until it is paid off). ``refund`` gives back
    what an estimate over-counted.
    """

    def __init__(self, per_minute: float, burst_s: float = 1.0):
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float = 1.0) -> None:
        async with self._lock:  # first come, first served
            need = min(amount, self.capacity)
            while True:
                self._refill()
                if self.level >= need:
                    self.level -= amount
                    return
                await asyncio.sleep((need - self.level) / self.rate)

    def refund(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)
