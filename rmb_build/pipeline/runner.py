"""The seam between the build's logic (``build.py``) and what executes its batches.

The build asks a runner for one stage (its ``StageSpec``) over one batch, with the batch's cache key
(``executor.py`` computes it); the runner returns the batch's :class:`~rmb_build.pipeline.executor.Timed`,
computed now (``executor.compute``) or reloaded from an earlier run under the same key (its
``flow_run_id`` then names that run).

- :class:`LocalRunner`: in this process, no server: CPU batches on a thread pool, results pickled
  under the run folder by cache key (``runs/<name>/batch-results``). Used by tests and by
  ``rmb build --runner local``.
- ``prefect_flow.PrefectRunner``: each batch a Prefect task (persisted results, the UI, the Dask task
  runner); what ``rmb build`` uses by default. Prefect is imported only on that side.

Both run the same stage work under the same keys, so a build gives the same release on either.
"""

from __future__ import annotations

import logging
import os
import pickle
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, Sequence

from rmb_build.core import atomic
from rmb_build.pipeline.executor import Timed, acompute, compute
from rmb_build.stages.spec import StageEnv, StageSpec

Log = logging.Logger | logging.LoggerAdapter  # the runner's log: Prefect's run logger is an adapter


class TimedFuture(Protocol):
    """A submitted batch: a ``concurrent.futures.Future`` or a Prefect future of its :class:`Timed`."""

    def result(self) -> Timed: ...


class Runner(Protocol):
    run_id: str  # the id stamped on what this run computes
    log: Log

    def call(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed: ...

    def submit(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> TimedFuture: ...

    async def acall(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed: ...


class LocalRunner:
    """Runs every batch in this process; persists each result under its cache key in ``results``."""

    def __init__(self, results: str | os.PathLike, log: Log | None = None, max_workers: int | None = None):
        self.results = Path(results)
        self.run_id = f"local-{uuid.uuid4().hex}"
        self.log: Log = log or logging.getLogger("rmb_build.build")
        # CPU batches: torch already uses every core, so more threads than cores only contend
        self._pool = ThreadPoolExecutor(max_workers or os.cpu_count() or 2, thread_name_prefix="rmb-batch")

    def _path(self, spec: StageSpec, key: str) -> Path:
        return self.results / f"{spec.name}-{key}.pickle"

    def _load(self, spec: StageSpec, key: str | None) -> Timed | None:
        if key is None:
            return None
        try:
            with open(self._path(spec, key), "rb") as fh:
                return pickle.load(fh)
        except FileNotFoundError:
            return None
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None  # a result of older code, or cut short: computed again

    def _keep(self, spec: StageSpec, key: str | None, timed: Timed) -> Timed:
        timed.flow_run_id = self.run_id
        if key is not None:
            atomic.write_bytes(self._path(spec, key), pickle.dumps(timed, protocol=pickle.HIGHEST_PROTOCOL))
        return timed

    def call(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed:
        hit = self._load(spec, key)
        return hit if hit is not None else self._keep(spec, key, compute(spec, env, inputs))

    def submit(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Future[Timed]:
        return self._pool.submit(self.call, spec, key, env, inputs)

    async def acall(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed:
        hit = self._load(spec, key)
        return hit if hit is not None else self._keep(spec, key, await acompute(spec, env, inputs))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


__all__ = ["LocalRunner", "Runner"]
