"""User-facing errors: one line that names the file, the item and the field.

The CLI prints these without a traceback and exits with status 2. Anything else is a bug.
"""

from __future__ import annotations


class RMBError(Exception):
    """An error a user can fix; its message is printed as is."""


class InputError(RMBError):
    """Bad input in a file the user handed us: names the file, the item (index or uid) and the field."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        item: str | int | None = None,
        field: str | None = None,
        line: int | None = None,
    ):
        self.file, self.item, self.field, self.line = str(file), item, field, line
        where = [self.file]
        if line is not None:
            where.append(f"line {line}")
        if item is not None:
            where.append(f"item {item}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join(where)}: {message}")


class ConfigError(RMBError):
    """A build config that cannot run; raised before any LLM call."""

    def __init__(self, file: str, field: str | None, message: str):
        self.file, self.field = str(file), field
        super().__init__(f"{file}: {'field ' + repr(field) + ': ' if field else ''}{message}")
