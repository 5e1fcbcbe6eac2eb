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
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

    from rmb_build.pipeline.runner import Log

LOG_INTERVAL_S = 25.0  # under the 30 s: a log line lands before the silence reaches it
# What a prompt token costs beside a generated one when the whole build's time left is weighed: a server
# reads a prompt in one pass and writes a reply token by token (llama.cpp on a CPU: about ten times faster).
PROMPT_TOKEN_WEIGHT = 0.1
NOT_MEASURED = "; whole build: ETA ? (known once the LLM stages answer)"


@dataclass
class _Stage:
    name: str
    total: int = 0
    begun: int = 0
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    bar: tqdm | None = None
    base: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the LLM counts when it began
    ended: tuple[int, ...] | None = None  # its LLM figures when its last batch ended (``_deltas``)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def opening_line(name: str, stages: Sequence[str], runner: str) -> str:
    """A build's first progress line, said before any work (before a runner or a model starts): what it
    will run. Like every progress line it ends with the whole build's time left, not known yet."""
    return f"progress: build {name!r} begins on the {runner} runner: stages {', '.join(stages)}{NOT_MEASURED}"


def bars_wanted(stream: TextIO | None = None) -> bool:
    """A live bar only on a terminal, and not under CI (whose log is a file, whatever it claims)."""
    stream = stream or sys.stderr
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return bool(getattr(stream, "isatty", lambda: False)()) and not ci


class BuildProgress:
    """Per-stage progress; ``mode``: ``"bars"``, ``"log"`` or ``"off"``. ``client`` is a function
    giving the build's LLM client (or None), read when a line is written."""

    def __init__(
        self,
        log: Log,
        mode: str,
        client: Callable[[], Any] = lambda: None,
        interval_s: float | None = None,
        sends: Callable[[str], tuple[str, ...]] = lambda stage: (stage,),
        llm_stages: Sequence[str] = (),
    ):
        """``sends(stage)``: the stages named on the LLM requests ``stage`` sends (``StageSpec.requests_of``);
        ``llm_stages``: the LLM stages the build will run (until one begins or is expected, the whole
        build's time left is a lower bound that names it)."""
        self.log, self.mode, self._client = log, mode, client
        self.interval_s = LOG_INTERVAL_S if interval_s is None else interval_s
        self._sends, self._llm_stages = sends, tuple(llm_stages)
        self._stages: dict[str, _Stage] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._redirect: contextlib.AbstractContextManager[None] | None = None
        if mode == "bars":  # log lines above the bars, not through them
            from tqdm.auto import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            # the bars' own class: tqdm.write clears only the bars of the class it is called on
            self._redirect = logging_redirect_tqdm(tqdm_class=tqdm)
            self._redirect.__enter__()
        if mode != "off":
            tick = 1.0 if mode == "bars" else self.interval_s
            self._thread = threading.Thread(target=self._beat, args=(tick,), name="build-progress", daemon=True)
            self._thread.start()

    def _stage(self, name: str) -> _Stage:
        st = self._stages.get(name)
        if st is None:
            st = self._stages[name] = _Stage(name, base=self._counts(name))
        if st.bar is None and self.mode == "bars":
            from tqdm.auto import tqdm

            # leave=False: a finished bar goes (its stage's summary line stays); one that stayed would sit
            # between the live bars, and tqdm redraws those over it
            st.bar = tqdm(total=st.total, initial=st.done, desc=name, unit="batch", dynamic_ncols=True, leave=False)
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
            if not st.begun:  # elapsed, rate and ETA count from its first batch, not from when it was expected
                st.started = time.monotonic()
                st.base = self._counts(stage)
                if st.bar is not None:
                    st.bar.reset(total=st.total)
            st.ended = None
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
            if st.done == st.total:  # its figures stop here (a later stage may ask the same model)
                st.ended = self._deltas(stage)
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

    def whole_build(self) -> str:
        """The whole build's time left, ending every progress line: ``; whole build: ETA 12m30s``.

        From the plan (each LLM stage's batches, expected before they begin, times the requests its begun
        batches asked) and the rate measured so far: the seconds since the first unfinished LLM stage began
        over the work the unfinished stages' answered requests did (a finished stage's rate was that of
        another mix of requests: the gold check's and routing's prompts are long, their replies short), work counted in tokens (a reply's, and a prompt's at
        ``PROMPT_TOKEN_WEIGHT``), each stage's requests left weighed at its mean so far. Stages that
        share a server each slow the other, so one rate for all of them. A stage not planned yet (the
        chains' before routing ends) or with no answered request yet is not counted, and the figure is a
        lower bound (``>=``) that names it; the steps after the LLM stages (sets, release) are not counted."""
        if self._client() is None:
            return NOT_MEASURED
        done = left = 0.0
        began: list[float] = []
        unknown = [name for name in self._llm_stages if name not in self._stages]  # not planned yet
        for st in self._stages.values():
            deltas = self._deltas(st.name)
            if not deltas or st.ended is not None:  # no LLM stage, or finished (its rate was another mix's)
                continue
            sent, _cached, _failed, resolved, asked, prompt, completion = deltas
            if not asked or not sent:  # not begun (expected, or asking), or no answer yet: left to measure
                if asked or (not st.begun and st.done < st.total):
                    unknown.append(st.name)
                continue
            weight = (completion + PROMPT_TOKEN_WEIGHT * prompt) / sent  # this stage's work per answered request
            began.append(st.started)
            done += sent * weight
            planned = asked + asked / max(st.begun, 1) * max(st.total - st.begun, 0)
            left += max(planned - resolved, 0) * weight
        if not unknown and not done:  # no LLM stage has begun or is expected yet
            return NOT_MEASURED
        if not done:
            return f"; whole build: ETA ? (no request answered yet: {', '.join(unknown)})"
        eta = _clock((time.monotonic() - min(began)) * left / done)
        if unknown:
            return f"; whole build: ETA >= {eta} ({', '.join(unknown)} not measured yet)"
        return f"; whole build: ETA {eta}"

    def _deltas(self, stage: str) -> tuple[int, ...]:
        """``stage``'s LLM figures since it began: (sent, cached, failed, resolved, asked, prompt tokens,
        completion tokens); () for a stage that sends no request."""
        st = self._stages[stage]
        if st.ended is not None:
            return st.ended
        base, now = st.base, self._counts(stage)
        if not now:
            return ()
        zero = (0,) * 7
        return tuple(sum(v[i] - base.get(k, zero)[i] for k, v in now.items()) for i in range(7))

    def _counts(self, stage: str) -> dict[str, tuple[int, ...]]:
        """Per LLM stage that ``stage`` sends for: (sent, cached, failed, resolved, asked, prompt tokens,
        completion tokens), so far."""
        client = self._client()
        if client is None:
            return {}
        usage, out = client.usage(), {}
        for name in self._sends(stage):
            rows = usage.get(name, {}).values()
            sums = tuple(sum(r[k] for r in rows) for k in ("requests", "cached", "failed"))
            tokens = tuple(sum(r.get(k, 0) for r in rows) for k in ("prompt_tokens", "completion_tokens"))
            out[name] = (*sums, *client.flow(name), *tokens)
        return out

    def _calls(self, stage: str) -> str:
        """``stage``'s LLM calls since it began (a stage that asks another's model, e.g. the gold check
        asking the judge, counts those), and the build's cost so far."""
        client, delta = self._client(), self._deltas(stage)
        sent, cached, failed, resolved, asked = delta[:5] or (0,) * 5
        if not any(delta[:5]):  # no client, or no call yet
            return ""
        limit = client.max_cost
        cost = f"${client.spent_usd:.4f}" + (f" of --max-cost ${limit:g}" if limit is not None else "")
        text = f"; LLM calls: {sent} sent, {cached} cached, {failed} failed; cost so far {cost}"
        return text + self._requests(stage, resolved, asked, cached)

    def _requests(self, stage: str, resolved: int, asked: int, cached: int) -> str:
        """Inside the batches begun, requests with an outcome of those asked, their rate and ETA: a
        long batch moves request by request, not only when it ends. The rate is of those answered by the
        endpoint: cached replies come at once (a resumed build's would promise an ETA of seconds)."""
        if not asked:
            return ""
        if resolved >= asked:
            return f"; requests {resolved}/{asked} done"
        elapsed = time.monotonic() - self._stages[stage].started
        text = f"; requests {resolved}/{asked} done in the batches begun"
        if resolved > cached and elapsed > 0:
            rate = (resolved - cached) / elapsed
            text += f", {rate * 60:.1f}/min, ETA {_clock((asked - resolved) / rate)} for those"
        return text

    def bar_postfix(self, stage: str) -> str:
        """What a bar shows after its counts: the whole build's time left first, then ``stage``'s LLM calls. A
        terminal cuts a bar at its width, and the stage's calls run past 150 columns; a log line keeps the
        whole build's ETA at its end."""
        return (self.whole_build() + self._calls(stage)).removeprefix("; ")

    def _show(self, st: _Stage) -> None:
        if st.bar is not None:
            st.bar.total, st.bar.n = st.total, st.done
            st.bar.refresh()
            if st.done == st.total:  # finished: the bar closes (a later batch opens another)
                st.bar.set_postfix_str(self._calls(st.name).removeprefix("; "), refresh=False)
                st.bar.close()
                st.bar = None

    def _beat(self, tick: float) -> None:
        while not self._stop.wait(tick):
            with self._lock:
                stages = self._stages.values()  # those at work, else those waiting for their first batch
                for st in [s for s in stages if s.begun > s.done] or [s for s in stages if s.done < s.total]:
                    try:
                        text = self.line(st.name) + self.whole_build()
                    except Exception:  # a progress line never stops a build
                        continue
                    if self.mode == "log":
                        self.log.info("progress: %s", text)
                    elif st.bar is not None:
                        st.bar.set_postfix_str(self.bar_postfix(st.name), refresh=True)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for st in self._stages.values():
            if st.bar is not None:
                st.bar.close()
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
