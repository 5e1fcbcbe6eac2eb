"""What every query source is: its options (the common YAML keys) and the ``Source`` interface.

A source kind is one module in this package: an options class (``kind: Literal["<kind>"]`` plus the
kind's own keys) and a ``@source``-decorated ``Source`` subclass, registered in ``SOURCES`` (a
``core.registry.Registry`` that imports the package's modules on first lookup).
``rmb_build.stages.options`` validates ``sources:`` as the union of the registered options on ``kind``,
and gather, preflight, the gather cache key and the manifest ask the registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Iterator, get_args

from rmb_build.core.errors import InputError
from rmb_build.core.json_array import ArrayTail
from rmb_build.core.registry import Registry
from rmb_build.stages.sources.options import SourceOptions

RawRecord = tuple[int, Any]  # (line or element index, decoded record or jsonl.BadLine)
MAX_IDENTITY_FILES = 10_000


class SourceError(ValueError):
    """A source that cannot be read as configured (preflight turns it into a ConfigError on ``path``)."""


class Source:
    """One configured source. Subclasses set ``options`` and implement ``records``."""

    kind: ClassVar[str]
    options: ClassVar[type[SourceOptions]]

    def __init__(self, opts: SourceOptions):
        self.opts = opts

    def check(self) -> None:
        """Preflight, before any work: raise SourceError when the source cannot be read."""
        local_path_check(self.opts)

    def records(self, tail: ArrayTail) -> Iterator[Any]:
        """``(where, raw record)`` in source order; a record that cannot be decoded is a ``BadLine``
        (quarantined by gather). ``tail`` learns about a cut-off JSON array."""
        raise NotImplementedError

    def to_query(self, record: Any, label: str, where: int):
        """One raw record as a Query, or ``records.Skip`` (filtered or quarantined) with the reason."""
        from rmb_build.stages.sources.records import make_query

        return make_query(record, self.opts, label, where)

    def label(self) -> str:
        """A machine-independent name: part of every query's id, so ids stay stable across machines."""
        return f"{self.kind}:{Path(self.opts.path or '').name}"

    def identity(self) -> object:
        """What the gather cache key holds besides the options: the files behind the source."""
        return file_identity(self.opts.path)

    def where(self) -> str | None:
        """Where the source is, for the manifest."""
        return self.opts.path

    def path(self) -> Path:
        """The configured local path (InputError when missing)."""
        if not self.opts.path:
            raise InputError(self.kind, f"a '{self.kind}' source needs a 'path'", field="path")
        path = Path(self.opts.path).expanduser()
        if not path.exists():
            raise InputError(str(path), "no such file or folder", field="path")
        return path


def local_path_check(opts: SourceOptions) -> Path:
    """A source's local path exists and is readable (SourceError otherwise); returns it."""
    import os

    if not opts.path:
        raise SourceError(f"a '{opts.kind}' source needs a 'path'")
    path = Path(opts.path).expanduser()
    if not path.exists():
        raise SourceError(f"{opts.path}: no such file or folder")
    if not os.access(path, os.R_OK) or (path.is_dir() and not os.access(path, os.X_OK)):
        raise SourceError(f"{opts.path}: not readable")
    if path.is_file():
        try:
            with open(path, "rb") as fh:
                fh.read(1)
        except OSError as exc:
            raise SourceError(f"{opts.path}: cannot be read ({exc.strerror})") from None
    return path


def file_identity(path: str | None) -> object:
    """The files under ``path`` with size and mtime (the path itself when it does not exist)."""
    if not path:
        return None
    p = Path(path).expanduser()
    if not p.exists():
        return str(p)
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    return [(f.as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files[:MAX_IDENTITY_FILES]]


# Here rather than in the package's __init__, which imports this module for its names.
SOURCES: Registry[type[Source]] = Registry("source kind", "rmb_build.stages.sources")


def source(kind: str):
    """Register a ``Source`` subclass as source kind ``kind`` (its ``options`` must say ``kind: Literal[kind]``)."""

    def register(cls: type[Source]) -> type[Source]:
        if get_args(cls.options.model_fields["kind"].annotation) != (kind,):
            raise ValueError(f"{cls.__name__}.options must declare kind: Literal[{kind!r}]")
        cls.kind = kind
        return SOURCES.add(kind, cls)

    return register
