"""Evaluation folders of known truth for the uncertainty tests: predictions drawn per scenario, results.json
written by the evaluator's own ``build_results`` (no model, no release files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, all_scenarios
from rmb_build.evaluate.metrics import build_results

SHA = "c" * 64


def tiny_release(rng: np.random.Generator, low: int = 1, high: int = 4) -> list[tuple[str, str, int, float]]:
    """(set, scenario, items, accuracy): every RMB scenario in both sets, ``low``..``high`` items each."""
    ids = [s.id for s in all_scenarios()]
    sets = [PAIRWISE_SET] * len(ids) + [BON_SET] * len(ids)
    sizes = rng.integers(low, high + 1, len(sets))
    theta = rng.uniform(0.4, 0.95, len(sets))
    return [(st, sc, int(n), float(t)) for st, sc, n, t in zip(sets, ids + ids, sizes, theta)]


def draw_rows(rng: np.random.Generator, release, shift: float = 0.0) -> list[dict[str, Any]]:
    """One RM's prediction rows: each outcome Bernoulli of its scenario's accuracy + ``shift``."""
    return [
        {"set": st, "scenario": sc, "uid": f"{sc}#{i}", "outcome": float(rng.random() < min(1.0, t + shift))}
        for st, sc, n, t in release
        for i in range(n)
    ]


def write_evaluation(folder: Path, rm: str, rows: Sequence[dict[str, Any]], protocol: str | None = None) -> Path:
    """An ``rmb evaluate``-shaped folder: predictions.jsonl and results.json as the evaluator's ``build_results``
    writes them (a page checks every figure against the predictions)."""
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    results = build_results(rows, rm=rm, release="tiny", ties="strict", resamples=20)
    results["release_info"] = {"name": "tiny", "sha256": SHA}
    if protocol:
        results["protocol"] = {"name": protocol}
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder
