"""The task runner named by ``run.task_runner`` in the build config.

``thread`` (default) runs CPU stages' batches in a thread pool in this process. ``dask`` hands
them to ``prefect_dask.DaskTaskRunner`` (``pip install 'rmb_build[dask]'``), on a local cluster or
the scheduler at ``run.dask_address``; pair it with a Prefect server (``PREFECT_API_URL``) when
several machines report to one place. LLM stages always run in the flow's event loop, where the
LLM client's rate limits and cache live; point them at vLLM endpoints to scale generation.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rmb_build.core.errors import ConfigError
from rmb_build.core.extras import install_line
from rmb_build.pipeline.config import RunConfig

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

# run.task_runner: dask without prefect-dask (the dask extra, not the build extra's)
DASK_MISSING = f"'dask' needs the prefect-dask package, which the dask extra installs: {install_line('dask')}"


def make_task_runner(run: RunConfig, file: str = "<config>") -> TaskRunner[Any]:
    """A Prefect task runner for ``run.task_runner`` (a thread pool's or Dask's: their futures differ);
    ConfigError if its package is missing."""
    if run.task_runner == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        # Batches are CPU-bound (torch already uses every core): more threads than cores only contend.
        return ThreadPoolTaskRunner(max_workers=os.cpu_count() or 2)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise ConfigError(file, "run.task_runner", DASK_MISSING) from None
    if run.dask_address:
        return DaskTaskRunner(address=run.dask_address)
    return DaskTaskRunner()
