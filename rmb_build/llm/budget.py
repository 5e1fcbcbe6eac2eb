"""The spending limit (``max_cost``): a call reserves its worst-case cost before it is sent, and
settles at what it really cost once the reply is in."""

from __future__ import annotations

import threading

from rmb_build.core.errors import RMBError


class BudgetExceeded(RMBError):
    """The next call would pass ``max_cost``; every response received so far is in the cache."""


class BudgetStop(Exception):
    """Raised inside a batch when a reservation would pass the limit (the batch then stops)."""


class Budget:
    """USD spent and reserved against an optional ``max_cost``; readable from any thread."""

    def __init__(self, max_cost: float | None = None):
        self.max_cost = max_cost
        self._spent = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, amount: float) -> float:
        """Hold ``amount`` for a call about to be sent; BudgetStop if that would pass ``max_cost``."""
        with self._lock:
            if self.max_cost is not None and amount > 0 and self._spent + self._reserved + amount > self.max_cost:
                raise BudgetStop()
            self._reserved += amount
        return amount

    def settle(self, reserved: float, spent: float) -> None:
        """Release a reservation and book what the call really cost."""
        with self._lock:
            self._reserved -= reserved
            self._spent += spent

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent
