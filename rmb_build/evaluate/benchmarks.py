"""results.json's fields for a release of another benchmark's format: its own headline, computed by the
format's module (``benchmarks/<format>.py``, ``summary``), and where a release downloaded by name came from.

Subset and domain names are the data's own, verbatim (``bigcode/humanevalpack``), not the encoded
parts of scenario ids.
"""

from __future__ import annotations

from typing import Any

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.base import BenchmarkRelease, Predictions
from rmb_build.release.read import Release


def benchmark_fields(release: Release, predictions: Predictions, ties: str) -> dict[str, Any]:
    """results.json's added top-level fields for a release read from another benchmark's format
    (``benchmark``) or downloaded by name (``release_source``); empty for a plain RMB release."""
    out: dict[str, Any] = {}
    if not isinstance(release, BenchmarkRelease):
        return out
    fmt = release.benchmark_format
    if fmt in BENCHMARK_FORMATS:
        out["benchmark"] = {"format": fmt, **BENCHMARK_FORMATS.get(fmt).summary(predictions, release.item_meta, ties)}
    if release.origin:
        out["release_source"] = release.origin
    return out


__all__ = ["benchmark_fields"]
