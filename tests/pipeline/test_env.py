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
