"""The build as a Prefect flow: every batch a Prefect task (``PrefectRunner``), CPU batches on the
task runner ``run.task_runner`` names (a thread pool, or Dask), results persisted in the run folder,
runs visible in Prefect's UI. Call ``env.configure_prefect`` before this module is imported."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any, Sequence

from prefect import flow, get_run_logger
from prefect.futures import PrefectFuture
from prefect.runtime import flow_run

from rmb_build.core import stop
from rmb_build.core.paths import BuildPaths
from rmb_build.pipeline.build import run_pipeline
from rmb_build.pipeline.config import BuildConfig, parse_config
from rmb_build.pipeline.context import RunOptions
from rmb_build.pipeline.executor import Timed
from rmb_build.pipeline.manifest import public_config
from rmb_build.pipeline.prefect_task_runner import make_task_runner
from rmb_build.pipeline.prefect_tasks import bind_storage
from rmb_build.pipeline.runner import Log
from rmb_build.stages.spec import StageEnv, StageSpec


class PrefectRunner:
    """Runs every batch as a Prefect task of the current flow run, its result persisted in ``storage``."""

    def __init__(self, storage: str | os.PathLike):
        self.tasks = bind_storage(Path(storage))
        run_id = flow_run.get_id()
        if run_id is None:  # Prefect gives none outside a flow run
            raise RuntimeError("PrefectRunner: not inside a Prefect flow run")
        self.run_id = run_id
        self.log: Log = get_run_logger()

    def call(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed:
        timed = self.tasks[spec.name](key, env, inputs)
        assert isinstance(timed, Timed), spec.name  # a sync stage's task: its result
        return timed

    def submit(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> PrefectFuture[Any]:
        # only sync stages' batches (CPU) are submitted: a future of their Timed
        return self.tasks[spec.name].submit(key, env, inputs)

    async def acall(self, spec: StageSpec, key: str | None, env: StageEnv, inputs: Sequence[Any]) -> Timed:
        timed = self.tasks[spec.name](key, env, inputs)
        assert not isinstance(timed, Timed), spec.name  # an async stage's task: a coroutine of its result
        return await timed

    def close(self) -> None:
        pass


# Live configs by reference, for this process's flow runs: Prefect stores a flow's parameters in its
# database, so the flow gets the config without secrets (URL credentials) plus this reference.
_LIVE_CONFIGS: dict[str, BuildConfig] = {}


def _flow_config(config: dict[str, Any], config_ref: str | None, config_file: str) -> BuildConfig:
    """The config handed over by ``run_with_prefect`` (with any credentials), else ``config`` as given."""
    live = _LIVE_CONFIGS.get(config_ref or "")
    return live if live is not None else parse_config(config, config_file)


@flow(name="rmb-build")
async def build_flow(
    config: dict[str, Any],
    workdir: str | None = None,
    config_file: str = "<config>",
    max_cost: float | None = None,
    dry_run: bool = False,
    config_ref: str | None = None,
    min_gold_agreement: float | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """``run_pipeline`` on Prefect: the config as a mapping, or the one registered under ``config_ref``."""
    cfg = _flow_config(config, config_ref, config_file)
    runner = PrefectRunner(BuildPaths.of(cfg.name, workdir).results)
    options = RunOptions(config_file, max_cost, dry_run, min_gold_agreement, progress)
    with stop.noting_sigterm():  # Prefect's own SIGTERM handler is in place here
        return await run_pipeline(cfg, runner, workdir, options)


def run_with_prefect(
    cfg: BuildConfig, workdir: str | os.PathLike | None = None, options: RunOptions | None = None
) -> dict[str, Any]:
    """Run :func:`build_flow` with the task runner the config names. The flow's parameters (which Prefect
    stores) hold the config without credentials and a reference to ``cfg`` itself, kept in this process."""
    options = options or RunOptions()
    task_runner = make_task_runner(cfg.run, options.config_file)
    flow_ = build_flow.with_options(task_runner=task_runner, flow_run_name=f"build-{cfg.name}")
    ref = uuid.uuid4().hex
    _LIVE_CONFIGS[ref] = cfg
    try:
        return asyncio.run(
            flow_(
                public_config(cfg),
                str(workdir) if workdir else None,
                options.config_file,
                options.max_cost,
                options.dry_run,
                ref,
                options.min_gold_agreement,
                options.progress,
            )
        )
    finally:
        del _LIVE_CONFIGS[ref]
