"""Query sources: one module per kind (see ``base``), all imported here so that each registers."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from rmb_build.stages.sources.base import SOURCES, Source, SourceError, SourceOptions, file_identity, source

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _mod != "base":
        importlib.import_module(f"{__name__}.{_mod}")


def source_for(opts: Any) -> Source:
    """The registered Source for one validated source config."""
    return SOURCES[opts.kind](opts)


def option_classes() -> tuple[type[SourceOptions], ...]:
    """Every registered kind's options class, in kind order (the config's union)."""
    return tuple(SOURCES[k].options for k in sorted(SOURCES))


__all__ = [
    "SOURCES",
    "Source",
    "SourceError",
    "SourceOptions",
    "file_identity",
    "option_classes",
    "source",
    "source_for",
]
