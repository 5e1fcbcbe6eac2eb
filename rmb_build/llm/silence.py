"""An endpoint that answers nothing stops the batch: asked, with no reply (of any status) for its
``silence_limit_s``, it is a stop in one line naming it, not a build retrying for ever.

A hung or trickling endpoint fails each try only at its deadline, and each failure is retried; without
this watch a build against one runs for hours. Every reply received before is cached, so the build
resumes where it stopped. Runs on the LLM client's event loop (no locks)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Awaitable, Callable, Mapping, TypeVar

from rmb_build.core.errors import RMBError

_T = TypeVar("_T")

POLL_S = 1.0


class EndpointSilent(RMBError):
    """An endpoint asked for longer than its ``silence_limit_s`` answered nothing."""


class SilenceWatch:
    """Per endpoint: how long it has been asked (a request outstanding) without a reply."""

    def __init__(self) -> None:
        self._asked: Counter[str] = Counter()
        self._since: dict[str, float] = {}  # the later of: the first ask while none was outstanding, the last reply
        self.last_failure: dict[str, str] = {}

    def asking(self, name: str) -> None:
        if not self._asked[name]:
            self._since[name] = time.monotonic()
        self._asked[name] += 1

    def done(self, name: str) -> None:
        self._asked[name] -= 1

    def heard(self, name: str) -> None:
        self._since[name] = time.monotonic()

    def silent_for(self, name: str) -> float:
        return time.monotonic() - self._since[name] if self._asked[name] else 0.0

    async def guard(self, work: Awaitable[_T], limits: Mapping[str, float], describe: Callable[[str], str]) -> _T:
        """Await ``work``; when an endpoint of ``limits`` (name -> seconds) stays silent past its limit,
        cancel ``work`` and raise EndpointSilent (``describe(name)``: how the line names the endpoint)."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=POLL_S)
                if done:
                    return task.result()
                for name, limit in limits.items():
                    if self.silent_for(name) > limit:
                        last = self.last_failure.get(name)
                        raise EndpointSilent(
                            f"endpoint {describe(name)} answered nothing for {limit:g}s (silence_limit_s)"
                            + (f"; last try: {last}" if last else "")
                            + "; every reply received before is cached: run the same command again to resume"
                        )
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
