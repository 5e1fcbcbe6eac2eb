"""Query sources: one module per kind (see ``base``), each registering itself in ``SOURCES``, which
imports them on first lookup."""

from __future__ import annotations

from rmb_build.stages.sources.base import SOURCES, Source, SourceError, SourceOptions, file_identity, source


def source_for(opts: SourceOptions) -> Source:
    """The registered Source for one validated source config."""
    return SOURCES.get(opts.kind, field="kind")(opts)


def option_classes() -> tuple[type[SourceOptions], ...]:
    """Every registered kind's options class, in kind order (the config's union)."""
    return tuple(cls.options for _, cls in SOURCES.items())


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
