"""Prefect settings for a build; must run before the first ``import prefect``.

Prefect reads its settings when it is imported, so ``rmb build`` calls :func:`configure_prefect`
first. A user's own settings (a Prefect server URL, a PREFECT_HOME) always win.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rmb_build.core.memory import bound_allocator


def configure_prefect(workdir: str | os.PathLike) -> Path:
    """Quiet, project-local Prefect defaults; returns the PREFECT_HOME in use.

    - no analytics (this machine has no network);
    - PREFECT_HOME under ``<workdir>/runs/.prefect`` unless the user set one, so the ephemeral
      server's database and settings stay with the project;
    - a 90 s ephemeral-server start-up timeout: several builds or test sessions starting at once
      on 2 cores exceed Prefect's default.
    """
    home = os.environ.setdefault("PREFECT_HOME", str(Path(workdir).resolve() / "runs" / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    Path(home).mkdir(parents=True, exist_ok=True)
    bound_allocator()  # not Prefect's, but this is where a build process starts: see rmb_build.core.memory
    return Path(home)


class _OwnLinesOnly(logging.Filter):
    """Passes our own lines through Prefect's run loggers, and Prefect's warnings, but not a failure's
    traceback nor its "Finished in state Failed(...)" line (the CLI prints the error once)."""

    def __init__(self, prefect_dir: str):
        super().__init__()
        self.prefect_dir = prefect_dir

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.startswith(self.prefect_dir):
            return True
        return (
            record.levelno >= logging.WARNING
            and not record.exc_info
            and not str(record.msg).startswith("Finished in state")
        )


def quiet_prefect(verbose: bool) -> None:
    """Without ``verbose``: Prefect's run loggers (which carry the build's own progress lines) drop
    Prefect's INFO chatter and the traceback it logs when a flow or task fails: the CLI reports the
    error itself, in one line. Call after ``import prefect`` (it configures logging on import)."""
    if verbose:
        return
    import prefect

    only_ours = _OwnLinesOnly(os.path.dirname(prefect.__file__))
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not any(isinstance(f, _OwnLinesOnly) for f in logger.filters):
            logger.addFilter(only_ours)
    logging.getLogger("prefect").setLevel(logging.WARNING)
