"""How many of the items to score a result's figures rest on (results.json ``coverage``).

Scores computed here cover every item (a failed score counts as a loss). Scores read from a file cover the
items it has rows for: figures over a part of a release are not the release's figures, so below the coverage
the user accepts (``--min-coverage``, default every item) evaluate refuses, and a partial figure, accepted
with ``--allow-partial``, says so on its headline line and in ``coverage.partial``.
"""

from __future__ import annotations

from typing import Any, Mapping

from rmb_build.core.errors import RMBError

FULL = 1.0
PARTIAL_FLAG = "--allow-partial"


def coverage_record(
    items: int, scored: int, min_coverage: float = FULL, source: str = "rmb evaluate"
) -> dict[str, Any]:
    """results.json ``coverage`` for ``scored`` of ``items`` items; RMBError (one line) below ``min_coverage``."""
    fraction = scored / items if items else 1.0
    if fraction < min_coverage:
        floor = "every item" if min_coverage >= FULL else f"{100 * min_coverage:g}% of the items"
        raise RMBError(
            f"{source}: the scores cover {scored:,} of the {items:,} items to score ({100 * fraction:.2f}%), below "
            f"--min-coverage {min_coverage:g} ({floor}): figures over a part of the release are not the "
            f"release's; add {PARTIAL_FLAG} to report them over those {scored:,} items, marked partial"
        )
    return {
        "items": items,
        "scored": scored,
        "fraction": fraction,
        "partial": scored < items,
        "min_coverage": min_coverage,
    }


def partial_note(results: Mapping[str, Any]) -> str:
    """``partial: N of M items`` for a partial result's headline; "" for a whole one (or one without a record)."""
    cov = results.get("coverage")
    if not isinstance(cov, Mapping) or not cov.get("partial"):
        return ""
    return f"partial: {cov['scored']:,} of {cov['items']:,} items"


__all__ = ["FULL", "PARTIAL_FLAG", "coverage_record", "partial_note"]
