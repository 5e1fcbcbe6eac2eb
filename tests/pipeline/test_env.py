"""Prefect's logging around a stop (``pipeline/env.py``): after the stop, nothing more from Prefect reaches the
CLI's handlers, from loggers made before the stop or after it (a stop that arrived while Prefect's engine was
being imported is raised when the import ends; the engine then logged "Crash detected!" under the stop's line)."""

from __future__ import annotations

import io
import logging

from rmb_build.pipeline.env import silence_prefect


def _prefect_loggers() -> dict[str, logging.Logger]:
    return {
        name: lg
        for name, lg in logging.root.manager.loggerDict.items()
        if (name == "prefect" or name.startswith("prefect.")) and isinstance(lg, logging.Logger)
    }


def test_after_a_stop_no_prefect_record_reaches_the_clis_handlers_even_from_a_logger_made_later(monkeypatch):
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    monkeypatch.setattr(logging.root, "handlers", [handler])
    monkeypatch.setattr(logging, "raiseExceptions", logging.raiseExceptions)
    top = logging.getLogger("prefect")
    level, disabled = top.level, {name: lg.disabled for name, lg in _prefect_loggers().items()}
    before = logging.getLogger("prefect.test_env_before")
    try:
        silence_prefect()
        later = logging.getLogger("prefect.test_env_made_later")
        later.setLevel(logging.INFO)
        later.disabled = False  # as a logging config applied after the stop leaves it
        for logger in (before, later):
            logger.error("Crash detected! Execution was aborted by a termination signal.")
        logging.getLogger("rmb_build.build").warning("our own line")
        assert out.getvalue() == "our own line\n"
    finally:  # the rest of this process's tests log through Prefect as before
        top.setLevel(level)
        for name, lg in _prefect_loggers().items():
            lg.disabled = disabled.get(name, False)


def test_the_engines_crash_report_is_dropped_without_a_noted_stop_and_its_other_lines_kept(monkeypatch):
    """A SIGTERM that lands while Prefect's flow engine starts or ends reaches Prefect's own handler outside the
    flow body, where no stop is noted: the engine's "Crash detected!" and "Finished in state Crashed(...)" lines
    followed the stop's line (CI, stop 58). Its other lines (where the run can be viewed) stay."""
    from rmb_build.core import stop
    from rmb_build.pipeline.env import quiet_prefect

    monkeypatch.setattr(stop, "_callbacks", [])
    engine = logging.getLogger("prefect.engine")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    names = ("prefect", "prefect.engine", "prefect.flow_runs", "prefect.task_runs")
    kept = {name: (logging.getLogger(name).level, list(logging.getLogger(name).filters)) for name in names}
    engine.addHandler(handler)
    try:
        quiet_prefect(False)
        engine.setLevel(logging.INFO)
        engine.info("View at http://127.0.0.1:4200/runs/flow-run/1")
        engine.error("Crash detected! Execution was aborted by a termination signal.")
        engine.error("Finished in state Crashed('Execution was aborted by a termination signal.')")
        assert out.getvalue() == "View at http://127.0.0.1:4200/runs/flow-run/1\n"
    finally:
        engine.removeHandler(handler)
        for name, (level, filters) in kept.items():  # the rest of this process's tests log through Prefect as before
            logging.getLogger(name).setLevel(level)
            logging.getLogger(name).filters[:] = filters
