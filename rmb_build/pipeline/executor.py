"""A stage's work over one batch, as every runner computes it: on a store object of its own (stages
that embed), timed, its result (a ``StageResult``, refused otherwise) in a :class:`Timed` that the runner
stamps with the run that computed it.
The step around it (cache key, runner, run summary) is ``context.BuildRun.call``."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from dataclasses import dataclass
from typing import Any, Sequence

from rmb_build.stages.spec import StageEnv, StageResult, StageSpec


@dataclass
class Timed:
    """A batch's result, the seconds its work took, and the run that computed it (stamped by the runner:
    another run's id on a reloaded result means a cache hit)."""

    value: StageResult[Any]
    seconds: float
    flow_run_id: str | None  # the run that computed it (stamped by the runner)
    started: float = 0.0  # epoch seconds: the work's span is [started, started + seconds]
    embeddings: dict[str, Any] | None = None  # the embedding store's stats for this work (StoreStats.to_json)


def _start(spec: StageSpec, env: StageEnv) -> StageEnv:
    """The env of one batch: a store object of its own, so that its figures are this batch's."""
    return dataclasses.replace(env, store=env.open_store()) if spec.encoder else env


def _timed(spec: StageSpec, start: float, value: object, env: StageEnv) -> Timed:
    if not isinstance(value, StageResult):  # a stage's one result type: what the run reads of every stage
        raise TypeError(f"stage {spec.name!r}: its work returned a {type(value).__name__}, not a StageResult")
    seconds = time.perf_counter() - start
    figures = env.store.stats.to_json() if env.store is not None else None
    return Timed(value, seconds, None, time.time() - seconds, figures)


def compute(spec: StageSpec, env: StageEnv, inputs: Sequence[Any]) -> Timed:
    """A CPU stage's work over one batch, timed (on whatever thread or worker the runner chose)."""
    assert spec.work is not None, spec.name  # a runner is asked only for stages with a work
    start = time.perf_counter()
    env = _start(spec, env)
    return _timed(spec, start, spec.work(env, *inputs), env)


async def acompute(spec: StageSpec, env: StageEnv, inputs: Sequence[Any]) -> Timed:
    """An LLM stage's work over one batch, timed, in the flow's event loop."""
    assert spec.work is not None, spec.name
    start = time.perf_counter()
    env = _start(spec, env)
    working = spec.work(env, *inputs)
    assert inspect.isawaitable(working), spec.name  # is_async(spec): the runners await only async works
    return _timed(spec, start, await working, env)


def is_async(spec: StageSpec) -> bool:
    return asyncio.iscoroutinefunction(spec.work)
