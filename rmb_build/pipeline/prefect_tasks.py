"""Prefect tasks, one per stage of ``pipeline/stages.STAGES``, made in one loop: each runs its stage's
work (``executor.compute``/``acompute``) over one batch, never one item.

Every task is cached under the explicit key the build computes (``keys.stage_key``) and persists its
result to the run folder (``bind_storage``), so a build started again after a kill reloads every
finished batch instead of redoing it. A task stamps its result with the flow run that computed it
(another run's id on a reloaded result means a cache hit). Only ``prefect_flow.PrefectRunner`` uses these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Coroutine, Sequence, TypeVar

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from rmb_build.pipeline import stages
from rmb_build.pipeline.executor import Timed, acompute, compute, is_async
from rmb_build.pipeline.keys import by_cache_key
from rmb_build.stages.spec import StageEnv, StageSpec

# Results go to the run folder, not also to Prefect's in-memory result cache (up to 1,000 records
# kept for the whole flow run: every batch's answers, scores and items of the build, in memory).
CACHED: dict[str, Any] = dict(cache_key_fn=by_cache_key, persist_result=True, cache_result_in_memory=False)
# A stage whose cache is elsewhere (``embed``: the embedding store) persists nothing.
UNCACHED: dict[str, Any] = dict(cache_policy=NO_CACHE, persist_result=False, cache_result_in_memory=False)


def _stamp(timed: Timed) -> Timed:
    timed.flow_run_id = flow_run.get_id()
    return timed


SyncTask = Task[[str | None, StageEnv, Sequence[Any]], Timed]
AsyncTask = Task[[str | None, StageEnv, Sequence[Any]], Coroutine[Any, Any, Timed]]
StageTask = SyncTask | AsyncTask  # called: a Timed, or (an async stage's) a coroutine of one

_Work = TypeVar("_Work", bound=Callable[..., object])


def _named(work: _Work, spec: StageSpec) -> _Work:
    # the function's name is the task's key in Prefect and its tasks' prefix on a Dask cluster
    work.__name__ = work.__qualname__ = f"{spec.name}_task"
    return work


def make_task(spec: StageSpec) -> StageTask:
    """The Prefect task of ``spec``: ``(cache_key, env, inputs) -> Timed``."""
    options = CACHED if spec.cached else UNCACHED
    if is_async(spec):

        async def awork(cache_key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed:
            return _stamp(await acompute(spec, env, inputs))

        return task(name=spec.name, **options)(_named(awork, spec))

    def work(cache_key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed:
        return _stamp(compute(spec, env, inputs))

    return task(name=spec.name, **options)(_named(work, spec))


def bind_storage(storage: Path) -> dict[str, StageTask]:
    """The tasks by stage name, their results persisted under ``storage`` (a folder in the run's folder)."""
    return {s.name: make_task(s).with_options(result_storage=storage) for s in stages.STAGES if s.work is not None}
