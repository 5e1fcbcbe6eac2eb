"""Atomic file writes: write a temporary file beside the target, fsync, then rename over it.

A crash never leaves a half-written file where a reader would find it.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from rmb_build.core.errors import RMBError
from rmb_build.core.finite import first_non_finite


def _default_mode() -> int:
    # mkstemp creates 0600 files; released files should get the usual 0666 & ~umask.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _default_mode()


@contextmanager
def open_atomic(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through: it appears (fsynced, renamed over) only when the block
    ends without an exception; otherwise the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with open_atomic(path) as fh:
        fh.write(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _dumps(path: str | os.PathLike, obj: Any, indent: int | None = None, line: int | None = None) -> str:
    """Strict JSON (no NaN or Infinity, which strict readers reject): RMBError naming the field otherwise."""
    try:
        return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError:
        field = first_non_finite(obj)
        if field is None:
            raise
        where = f"{path}: line {line}" if line is not None else str(path)
        raise RMBError(f"{where}: field '{field}' is not a finite number; the file was not written") from None


def write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> None:
    write_text(path, _dumps(path, obj, indent) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    write_text(path, "".join(_dumps(path, r, line=n) + "\n" for n, r in enumerate(rows, 1)))
