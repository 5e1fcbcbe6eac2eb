"""Silencing whole loggers where it lasts: a filter on the root logger's handlers.

A logger's ``disabled`` flag does not last: a logging configuration applied later (``logging.config.dictConfig``
without ``disable_existing_loggers``, as Prefect applies its own when it is imported) sets it back to False on every
logger it does not name. A handler's filters it leaves alone."""

from __future__ import annotations

import logging


class DropLoggers(logging.Filter):
    """Drops the records of the named loggers and of their children."""

    def __init__(self, names: tuple[str, ...]):
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(record.name == name or record.name.startswith(f"{name}.") for name in self.names)


def drop_from_root_handlers(*names: str) -> None:
    """From now on no record of the named loggers (or their children) reaches the root logger's handlers."""
    for handler in logging.root.handlers:
        if not any(isinstance(f, DropLoggers) and f.names == names for f in handler.filters):
            handler.addFilter(DropLoggers(names))
