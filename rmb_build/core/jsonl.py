"""Reading JSON Lines: the one reader every ``.jsonl`` the toolkit reads goes through.

Lines are read as bytes and decoded one at a time: a text-mode reader decodes 8 KB chunks, so one
bad byte would fail the whole chunk (and name the wrong line) instead of the one line it is in.
Blank lines are skipped. A bad line raises InputError naming the file and the line, or, for a
reader that quarantines (``lenient=True``), comes back as a ``BadLine``. A first line that is not
UTF-8 means a file in another encoding: that is always an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rmb_build.core.errors import InputError

MAX_KEPT_CHARS = 2000  # of a bad line, for a quarantine entry
TOO_MANY_DIGITS = "invalid JSON: a number with too many digits"


@dataclass
class BadLine:
    """A line that is not valid JSON (or not UTF-8): why, and the start of its text."""

    reason: str
    text: str


def iter_jsonl(path: str | os.PathLike, *, lenient: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of ``path`` (``BadLine`` values only when ``lenient``)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "no such file")
    decoded = False
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                reason = f"invalid UTF-8 at byte {exc.start} of the line"
                if not decoded:
                    raise InputError(str(path), f"{reason} (is the file in another encoding?)", line=n) from None
                if not lenient:
                    raise InputError(str(path), reason, line=n) from None
                yield n, BadLine(reason, raw[:MAX_KEPT_CHARS].decode("utf-8", "replace"))
                continue
            if not line.strip():
                continue
            decoded = True
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                if not lenient:
                    raise InputError(str(path), f"invalid JSON: {exc.msg}", line=n) from None
                yield n, BadLine(f"invalid JSON: {exc.msg} (column {exc.colno})", line[:MAX_KEPT_CHARS])
                continue
            except ValueError:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
                if not lenient:
                    raise InputError(str(path), TOO_MANY_DIGITS, line=n) from None
                yield n, BadLine(TOO_MANY_DIGITS, line[:MAX_KEPT_CHARS])
                continue
            yield n, value


def read_jsonl_objects(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each line; a line that is not a JSON object raises InputError."""
    for n, value in iter_jsonl(path):
        if not isinstance(value, dict):
            raise InputError(str(path), f"expected a JSON object, got {type(value).__name__}", line=n)
        yield n, value
