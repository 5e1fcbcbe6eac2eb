"""Prefect settings for a build; must run before the first ``import prefect``.

Prefect reads its settings when it is imported, so ``rmb build`` calls :func:`configure_prefect`
first. A user's own settings (a Prefect server URL, a PREFECT_HOME) always win.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from rmb_build.core import stop
from rmb_build.core.lifeline import pdeathsig_preexec
from rmb_build.core.log_filters import drop_from_root_handlers
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


SERVER_LOG = "temporary-server.log"  # under PREFECT_HOME


def detach_temporary_server() -> None:
    """Prefect's temporary API server (started where no server is configured, when first needed),
    in a session of its own with its output in ``<PREFECT_HOME>/temporary-server.log``.

    Prefect starts it in the build's process group, so the terminal's Ctrl-C stopped it too, in the
    middle of the build's last requests: its tracebacks followed the build's one line, and the build
    could not record its flow run as crashed. Detached, it stops when the build ends (Prefect's exit
    handler; the watchdog after a SIGKILL). Prefect keeps one such server per process: registering
    this one first is all it takes. Call after ``import prefect``."""
    import prefect
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import get_current_settings

    class Detached(SubprocessASGIServer):
        def _run_uvicorn_command(self) -> subprocess.Popen:
            # Prefect's own command and environment (prefect/server/api/server.py), in a new session.
            app = ["--app-dir", str(Path(prefect.__file__).parent.parent), "--factory"]
            args = [*app, "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port)]
            env = {
                **os.environ,
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
                **get_current_settings().to_environment_variables(exclude_unset=True),
            }
            home = Path(env.get("PREFECT_HOME") or Path.home() / ".prefect")
            home.mkdir(parents=True, exist_ok=True)
            with open(home / SERVER_LOG, "ab") as log:
                return subprocess.Popen(
                    [sys.executable, "-m", "uvicorn", *args, "--log-level", "error", "--lifespan", "on"],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=pdeathsig_preexec(),  # with the watchdog (pipeline/watchdog.py) for SIGKILL
                )

    Detached()  # registers itself as the process's temporary server, unless one is registered already


CRASH_REPORTS = ("Finished in state", "Crash detected!")  # how Prefect's records of a failed or stopped run begin


def _crash_report(record: logging.LogRecord) -> bool:
    """Whether ``record`` is Prefect's report of a run that failed or was stopped (its traceback, its "Crash
    detected!" and "Finished in state ..." lines): the CLI says what happened itself, in one line."""
    return bool(record.exc_info) or str(record.msg).startswith(CRASH_REPORTS)


class _OwnLinesOnly(logging.Filter):
    """Passes our own lines through Prefect's run loggers, and Prefect's warnings, but not its crash reports
    (``_crash_report``): a failure's traceback and "Finished in state Failed(...)", the "Crash detected!" of a
    sibling task cancelled because the run failed."""

    def __init__(self, prefect_dir: str):
        super().__init__()
        self.prefect_dir = prefect_dir

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.startswith(self.prefect_dir):
            return True
        return record.levelno >= logging.WARNING and not _crash_report(record)


class _NoCrashReports(logging.Filter):
    """Prefect's engine logger keeps its lines (where a run can be viewed) but not its crash reports. A SIGTERM
    that lands while the flow engine starts or ends, outside the flow body, reaches Prefect's own handler
    before the stop is noted (``stop.noting_sigterm`` wraps it inside the body only), and the engine logged
    "Crash detected! Execution was aborted by a termination signal." under the stop's line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _crash_report(record)


def silence_prefect() -> None:
    """Nothing more from Prefect: at a stop, its crash reports, its log shipper's connection errors
    (a server that is gone) and the temporary server's stop line would only bury the CLI's one line
    saying what was kept and how to resume."""
    logging.raiseExceptions = False  # Prefect's API log worker prints its failures only when this is set
    logging.getLogger("prefect").setLevel(logging.CRITICAL + 1)  # loggers made from now on
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if (name == "prefect" or name.startswith("prefect.")) and isinstance(logger, logging.Logger):
            logger.disabled = True
    # A Prefect logger made or configured after this (a stop that arrived while Prefect's engine was being
    # imported is raised when the import ends, and the engine logs its crash) still reaches the CLI's own
    # handlers: those drop every Prefect record from now on.
    drop_from_root_handlers("prefect")


def quiet_prefect(verbose: bool) -> None:
    """Without ``verbose``: Prefect's run loggers (which carry the build's own progress lines) drop
    Prefect's INFO chatter and the traceback it logs when a flow or task fails: the CLI reports the
    error itself, in one line; at a stop (``core/stop.py``), Prefect says nothing more. It imports Prefect first
    (which configures its logging on import), so that what it sets is not undone."""
    if verbose:
        return
    import prefect

    stop.on_stop(silence_prefect)  # after the import, which configures Prefect's logging: run now if a stop came
    only_ours = _OwnLinesOnly(os.path.dirname(prefect.__file__))
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not any(isinstance(f, _OwnLinesOnly) for f in logger.filters):
            logger.addFilter(only_ours)
    engine = logging.getLogger("prefect.engine")
    if not any(isinstance(f, _NoCrashReports) for f in engine.filters):
        engine.addFilter(_NoCrashReports())
    logging.getLogger("prefect").setLevel(logging.WARNING)
