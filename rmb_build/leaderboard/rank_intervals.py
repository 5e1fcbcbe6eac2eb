"""Rank uncertainty for one release's table: each RM's 95% rank interval and the benchmark's separability.

Both come from one paired bootstrap over the items every RM of the table scored (their ``predictions.jsonl``;
the table holds one release only, ``ranking.release_groups``): each draw resamples every scenario's items with
replacement (so each scenario keeps its size, as the macro figures weigh it), recomputes every RM's
``rmb_overall`` (the mean of the four cells, each its goal's mean of scenario accuracies) on the same draw,
and ranks the RMs (rank 1 + the number of RMs strictly better in that draw).

- ``rank_ci``: the 2.5% and 97.5% quantiles of an RM's rank over the draws.
- ``separability``: the share of RM pairs whose paired difference in ``rmb_overall`` has a 95% percentile
  interval excluding 0, over the RMs shown (PPE's separability asks the same of two RMs' own intervals; the
  paired difference is the sharper question, since both RMs scored the same items).
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.core.taxonomy import parse_scenario_id
from rmb_build.evaluate.metrics import RMB_CELLS
from rmb_build.leaderboard.entries import Entry

ALPHA = 0.05
CHUNK = 500  # draws per block: memory stays at CHUNK x items


def _outcomes(entry: Entry) -> dict[tuple[str, str], tuple[str, float]]:
    """(set, uid) -> (scenario, outcome) from the entry's predictions.jsonl."""
    path = entry.folder / "predictions.jsonl"
    return {(r["set"], str(r["uid"])): (r["scenario"], float(r["outcome"])) for _, r in read_jsonl_objects(path)}


def rank_uncertainty(entries: Sequence[Entry], resamples: int, seed: int = 0) -> dict[str, Any]:
    """``{"ranks": {rm: {"rank_ci": [lo, hi], "rank": int}}, "separability": {...}, "n_items": int}`` for the
    entries of one release, in the order given; ``{"reason": ...}`` where it cannot be computed."""
    if len(entries) < 2:
        return {"reason": "one reward model: nothing to rank against"}
    missing = [str(e.folder / "predictions.jsonl") for e in entries if not (e.folder / "predictions.jsonl").is_file()]
    if missing:
        return {"reason": f"no item outcomes ({', '.join(missing)} missing)"}
    per = [_outcomes(e) for e in entries]
    shared = sorted(set.intersection(*(set(p) for p in per)))
    if not shared:
        return {"reason": "the reward models share no items"}
    by_scenario: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for key in shared:
        by_scenario[(key[0], per[0][key][0])].append(key)
    # Per RMB cell (set/goal): its scenarios' outcome matrices (items x RMs).
    cells: dict[str, list[np.ndarray]] = defaultdict(list)
    for (set_name, scenario), keys in by_scenario.items():
        cell = f"{set_name}/{parse_scenario_id(scenario).goal}"
        if cell in RMB_CELLS:
            cells[cell].append(np.array([[p[k][1] for p in per] for k in keys]))
    if not cells:
        return {"reason": "no items in RMB's four cells"}
    rng = np.random.default_rng([seed, zlib.crc32(b"rank-intervals")])
    ranks, diffs = [], []
    for start in range(0, resamples, CHUNK):
        b = min(CHUNK, resamples - start)
        means = []
        for mats in cells.values():
            means.append(np.mean([m[rng.integers(0, len(m), size=(b, len(m)))].mean(axis=1) for m in mats], axis=0))
        overall = np.mean(means, axis=0)  # draws x RMs
        ranks.append(1 + (overall[:, None, :] > overall[:, :, None]).sum(axis=2))
        diffs.append(overall[:, :, None] - overall[:, None, :])
    rank = np.concatenate(ranks)
    diff = np.concatenate(diffs)
    point = np.mean([np.mean([m.mean(axis=0) for m in mats], axis=0) for mats in cells.values()], axis=0)
    out_ranks = {}
    for i, e in enumerate(entries):
        lo = int(np.quantile(rank[:, i], ALPHA / 2, method="lower"))
        hi = int(np.quantile(rank[:, i], 1 - ALPHA / 2, method="higher"))
        out_ranks[e.rm] = {"rank": int(1 + (point > point[i]).sum()), "rank_ci": [lo, hi]}
    detail = []
    for i in range(len(entries)):
        for j in range(i + 1, len(entries)):
            lo, hi = np.quantile(diff[:, i, j], [ALPHA / 2, 1 - ALPHA / 2])
            detail.append([entries[i].rm, entries[j].rm, bool(lo > 0 or hi < 0)])
    pairs, separated = len(detail), sum(d[2] for d in detail)
    return {
        "ranks": out_ranks,
        # detail: [rm, rm, separated] per pair, so that the page recounts over the RMs its filter shows
        "separability": {"share": separated / pairs, "separated": separated, "pairs": pairs, "detail": detail},
        "n_items": len(shared),
        "resamples": resamples,
        "seed": seed,
        "cells": sorted(cells),
    }


__all__ = ["rank_uncertainty"]
