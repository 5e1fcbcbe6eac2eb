"""Loggers silenced where it lasts (``rmb_build/core/log_filters.py``): a logging configuration applied after the
silencing (Prefect's, at import, after a stop) leaves it in place; the logger's own ``disabled`` flag it undid."""

from __future__ import annotations

import io
import logging
import logging.config

from rmb_build.cli import _quiet_unwinding
from rmb_build.core.log_filters import drop_from_root_handlers


def _reconfigured() -> None:
    """As Prefect's setup_logging does where the root logger has handlers of the application's."""
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False, "loggers": {"elsewhere": {}}})


def test_a_dropped_logger_stays_dropped_after_a_logging_config_and_others_pass(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(logging.root, "handlers", [logging.StreamHandler(out)])
    drop_from_root_handlers("asyncio")
    drop_from_root_handlers("asyncio")  # once per name set
    assert len(logging.root.handlers[0].filters) == 1
    _reconfigured()
    logging.getLogger("asyncio").error("unhandled exception during asyncio.run() shutdown")
    logging.getLogger("asyncio.sub").error("a child")
    logging.getLogger("asyncio_like").error("kept: not a child")
    assert out.getvalue() == "kept: not a child\n"


def test_the_clis_stop_silences_asyncio_through_a_later_logging_config(monkeypatch):
    """A SIGINT 0.01 s into a Prefect build: the loop's KeyboardInterrupt traceback followed the stop's line."""
    import warnings

    out = io.StringIO()
    monkeypatch.setattr(logging.root, "handlers", [logging.StreamHandler(out)])
    with warnings.catch_warnings():
        _quiet_unwinding()
    _reconfigured()
    logging.getLogger("asyncio").error("unhandled exception during asyncio.run() shutdown")
    assert out.getvalue() == "" and not logging.getLogger("asyncio").disabled
