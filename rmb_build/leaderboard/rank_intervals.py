"""Rank uncertainty for one release's table: each RM's rank range and the benchmark's separability, both
read off the one set of pairwise tests the table's "vs. next" column shows (``ranking.pair_tests``: ``rmb
compare``'s paired test of ``rmb_overall`` on the items the two RMs share).

- ``separated``: a pair whose test has p < 0.05 (its 95% interval excludes 0). A page can therefore never call a
  pair separated beside a p of 0.05 or more for it.
- ``rank_ci``: from 1 + the number of RMs significantly better than it to N - the number significantly worse.
  Estimand: the RM's rank by the RMs' expected ``rmb_overall`` (each scenario's accuracy over its population of
  items), 1 + the number of RMs whose expected figure is strictly higher. A range of whole places, not a 95%
  interval: it misses the true rank only where a test errs in the wrong direction (one side of a 5% test), so it
  holds it nearly always (100% of the calibration suite's draws; docs/calibration-uncertainty.md).

An item bootstrap (the method this replaces) gives a scenario of one item no variance, so on releases of tiny
scenarios it called two RMs of equal accuracy separated far more often than 5% of the time;
``bench/calibration_uncertainty.py`` measures both.
"""

from __future__ import annotations

from typing import Any, Sequence

from rmb_build.leaderboard.entries import Entry

ALPHA = 0.05


def rank_uncertainty(
    entries: Sequence[Entry], tests: dict[tuple[str, str], dict[str, Any]], resamples: int, seed: int = 0
) -> dict[str, Any]:
    """``{"ranks": {slug: {"rank", "rank_ci": [lo, hi]}}, "separability": {...}}`` for the entries of one
    release, best first, from their pair ``tests`` (keys: the two slugs, the better-ranked first);
    ``{"reason": ...}`` where some pair could not be tested."""
    if len(entries) < 2:
        return {"reason": "one reward model: nothing to rank against"}
    untested = [t for t in tests.values() if t.get("significant") is None]
    if untested:
        return {"reason": untested[0].get("reason", "a pair could not be tested")}
    n = len(entries)
    better = {e.slug: 0 for e in entries}  # RMs significantly better than it
    worse = {e.slug: 0 for e in entries}  # RMs significantly worse than it
    detail = []
    for i, a in enumerate(entries):
        for b in entries[i + 1 :]:
            t = tests[(a.slug, b.slug)]
            separated = bool(t["significant"])
            if separated:
                high, low = (a, b) if t["diff"] > 0 else (b, a)
                better[low.slug] += 1
                worse[high.slug] += 1
            detail.append([a.slug, b.slug, separated])
    points = [e.values.get("mean") for e in entries]
    ranks = {
        e.slug: {
            "rank": 1 + sum(p is not None and points[i] is not None and p > points[i] for p in points),
            "rank_ci": [1 + better[e.slug], n - worse[e.slug]],
        }
        for i, e in enumerate(entries)
    }
    pairs, separated = len(detail), sum(d[2] for d in detail)
    return {
        "ranks": ranks,
        # detail: [slug, slug, separated] per pair, so that the page recounts over the RMs its filter shows
        "separability": {"share": separated / pairs, "separated": separated, "pairs": pairs, "detail": detail},
        "resamples": resamples,
        "seed": seed,
    }


__all__ = ["ALPHA", "rank_uncertainty"]
