"""A build's progress, one mechanism for every stage (fed by ``context.BuildRun``'s one step): per
stage the batches done of those begun (or expected), their rate and ETA, and for LLM stages the calls
sent, cached and failed (``LLMClient.usage``) and the cost so far against ``--max-cost``.

On a terminal a live tqdm bar per stage; in a log (no TTY, CI, Prefect) a line per working stage at
most every ``interval_s`` seconds, from a heartbeat thread, so a long batch is never silent; with
``--no-progress`` nothing. Progress writes nothing a build keeps: only the log or the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

LOG_INTERVAL_S = 25.0  # under the 30 s: a log line lands before the silence reaches it


@dataclass
class _Stage:
    name: str
    total: int = 0
    begun: int = 0
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    bar: Any = None


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def bars_wanted(stream: Any = None) -> bool:
    """A live bar only on a terminal, and not under CI (whose log is a file, whatever it claims)."""
    stream = stream or sys.stderr
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return bool(getattr(stream, "isatty", lambda: False)()) and not ci


class BuildProgress:
    """Per-stage progress; ``mode``: ``"bars"``, ``"log"`` or ``"off"``. ``client`` is a function
    giving the build's LLM client (or None), read when a line is written."""

    def __init__(
        self,
        log: Any,
        mode: str,
        client: Callable[[], Any] = lambda: None,
        interval_s: float = LOG_INTERVAL_S,
    ):
        self.log, self.mode, self._client, self.interval_s = log, mode, client, interval_s
        self._stages: dict[str, _Stage] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._redirect: Any = None
        if mode == "bars":  # log lines above the bars, not through them
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._redirect = logging_redirect_tqdm()
            self._redirect.__enter__()
        if mode != "off":
            tick = 1.0 if mode == "bars" else interval_s
            self._thread = threading.Thread(target=self._beat, args=(tick,), name="build-progress", daemon=True)
            self._thread.start()

    def _stage(self, name: str) -> _Stage:
        st = self._stages.get(name)
        if st is None:
            st = self._stages[name] = _Stage(name)
        if st.bar is None and self.mode == "bars":
            from tqdm.auto import tqdm

            st.bar = tqdm(total=st.total, initial=st.done, desc=name, unit="batch", dynamic_ncols=True)
        return st

    def expect(self, stage: str, total: int) -> None:
        """``stage`` will run ``total`` batches (known before they begin, e.g. the LLM chains)."""
        with self._lock:
            st = self._stage(stage)
            st.total = max(st.total, total)
            self._show(st)

    def begin(self, stage: str) -> None:
        """A batch of ``stage`` begins (counts toward its total unless that was expected)."""
        with self._lock:
            st = self._stage(stage)
            st.begun += 1
            st.total = max(st.total, st.begun)
            self._show(st)

    @contextlib.contextmanager
    def step(self, stage: str) -> Iterator[None]:
        """A step the flow runs itself, over the whole run (gold, route, release): one batch."""
        self.begin(stage)
        try:
            yield
        finally:
            self.done(stage)

    def done(self, stage: str) -> None:
        """A batch of ``stage`` finished (computed or reloaded)."""
        with self._lock:
            st = self._stage(stage)
            st.done += 1
            st.total = max(st.total, st.done)
            self._show(st)

    def line(self, stage: str) -> str:
        """``stage``'s progress in words: done/total, rate, ETA, and its LLM calls and cost."""
        st = self._stages[stage]
        elapsed = time.monotonic() - st.started
        text = f"{st.name}: {st.done}/{st.total} batches, {_clock(elapsed)} elapsed"
        if st.done and st.done < st.total:
            rate = st.done / elapsed if elapsed > 0 else 0.0
            text += f", {rate * 60:.2f} batches/min, ETA {_clock((st.total - st.done) / rate) if rate else '?'}"
        return text + self._calls(stage)

    def _calls(self, stage: str) -> str:
        client = self._client()
        if client is None:
            return ""
        rows = client.usage().get(stage)
        if not rows:
            return ""
        sent = sum(r["requests"] for r in rows.values())
        cached = sum(r["cached"] for r in rows.values())
        failed = sum(r["failed"] for r in rows.values())
        limit = client.max_cost
        cost = f"${client.spent_usd:.4f}" + (f" of --max-cost ${limit:g}" if limit is not None else "")
        return f"; LLM calls: {sent} sent, {cached} cached, {failed} failed; cost so far {cost}"

    def _show(self, st: _Stage) -> None:
        if st.bar is not None:
            st.bar.total, st.bar.n = st.total, st.done
            st.bar.refresh()
            if st.done == st.total:  # finished: the bar stays as it is (a later batch opens another)
                st.bar.set_postfix_str(self._calls(st.name).removeprefix("; "), refresh=False)
                st.bar.close()
                st.bar = None

    def _beat(self, tick: float) -> None:
        while not self._stop.wait(tick):
            with self._lock:
                stages = self._stages.values()  # those at work, else those waiting for their first batch
                for st in [s for s in stages if s.begun > s.done] or [s for s in stages if s.done < s.total]:
                    try:
                        text = self.line(st.name)
                    except Exception:  # a progress line never stops a build
                        continue
                    if self.mode == "log":
                        self.log.info("progress: %s", text)
                    elif st.bar is not None:
                        st.bar.set_postfix_str(self._calls(st.name).removeprefix("; "), refresh=True)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for st in self._stages.values():
            if st.bar is not None:
                st.bar.close()
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
