"""User-facing errors: one line that names the file, the item and the field.

The CLI prints these without a traceback and exits with status 2. Anything else is a bug.
"""

from __future__ import annotations

import difflib
import errno
from typing import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The name in ``known`` closest to ``word`` (a misspelling of it, or it of a misspelling); None when none is close."""
    near = difflib.get_close_matches(word, [k for k in known if isinstance(k, str)], n=1, cutoff=0.6)
    return near[0] if near else None


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
        self.file, self.field, self.message = str(file), field, message
        super().__init__(f"{file}: {'field ' + repr(field) + ': ' if field else ''}{message}")


# What the machine, not the program, got wrong: a full disk or quota, a read-only or forbidden place,
# a file too large for the system's limit, a path through a file, a folder where a file goes. One line
# names the path.
ENVIRONMENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG", "ENOTDIR", "EISDIR", "EIO")
    if hasattr(errno, name)
)


def environment_error(exc: BaseException) -> str | None:
    """One line for an OSError of the machine (disk full, read-only, ...): ``PATH: reason``; None for any other."""
    if not isinstance(exc, OSError) or exc.errno not in ENVIRONMENT_ERRNOS:
        return None
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return f"{exc.filename}: {reason}" if exc.filename else reason
