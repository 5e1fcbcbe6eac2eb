"""``run_build``: one build on the runner asked for. ``prefect`` (default for ``rmb build``): the Prefect
flow (``prefect_flow.py``; call ``env.configure_prefect`` first); ``local``: in this process, no
server (``runner.LocalRunner``). Both run the same pipeline and give the same release."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Literal

from rmb_build.core.paths import BuildPaths
from rmb_build.pipeline.build import run_pipeline
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.context import RunOptions
from rmb_build.pipeline.runner import LocalRunner

RUNNERS = ("prefect", "local")


def run_local(cfg: BuildConfig, workdir: str | os.PathLike | None = None, **options: Any) -> dict[str, Any]:
    """``run_pipeline`` in this process (``options``: those of :class:`RunOptions`)."""
    runner = LocalRunner(BuildPaths.of(cfg.name, workdir).batch_results)
    try:
        return asyncio.run(run_pipeline(cfg, runner, workdir, RunOptions(**options)))
    finally:
        runner.close()


def run_build(
    cfg: BuildConfig,
    workdir: str | os.PathLike | None = None,
    *,
    runner: Literal["prefect", "local"] = "prefect",
    config_file: str = "<config>",
    max_cost: float | None = None,
    dry_run: bool = False,
    min_gold_agreement: float | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Build ``cfg`` into ``workdir`` on ``runner``; returns the run summary."""
    options = RunOptions(config_file, max_cost, dry_run, min_gold_agreement, progress)
    if runner == "local":
        return run_local(cfg, workdir, **vars(options))
    if runner != "prefect":
        raise ValueError(f"unknown runner {runner!r} (runners: {', '.join(RUNNERS)})")
    from rmb_build.pipeline.prefect_flow import run_with_prefect

    return run_with_prefect(cfg, workdir, options)
