"""results.json's fields for a release of another benchmark's format: its own headline, computed by the
format's module (``benchmarks/<format>.py``, ``summary``), and where a release downloaded by name came from.

Subset and domain names are the data's own, verbatim (``bigcode/humanevalpack``), not the encoded
parts of scenario ids.
"""

from __future__ import annotations

from typing import Any

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.base import Predictions


def benchmark_fields(release: Any, predictions: Predictions, ties: str) -> dict[str, Any]:
    """results.json's added top-level fields for a release read from another benchmark's format
    (``benchmark``) or downloaded by name (``release_source``); empty for a plain RMB release."""
    out: dict[str, Any] = {}
    fmt = getattr(release, "benchmark_format", None)
    if fmt is not None and fmt in BENCHMARK_FORMATS:
        out["benchmark"] = {"format": fmt, **BENCHMARK_FORMATS.get(fmt).summary(predictions, release.item_meta, ties)}
    if getattr(release, "origin", None):
        out["release_source"] = release.origin
    return out


__all__ = ["benchmark_fields"]
