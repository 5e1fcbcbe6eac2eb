"""RM-Bench's style-controlled figures for a release's ``Style_set/`` (results.json ``style``).

Each record's three chosen and three rejected variants (concise, detailed plain, detailed markdown) are scored
like any other text (through the score cache) and compared as RM-Bench's 3x3 matrix: chosen style i against
rejected style j, ``hard`` above the diagonal, ``normal`` on it, ``easy`` below (``benchmarks/rmbench.py``'s
``difficulty``); a tie counts as wrong whatever ``--ties`` says (RM-Bench's ``score_chosen > score_rejected``).
Per scenario a level's accuracy is the mean of its cells over the records, as RM-Bench's ``compute_accuracy``
computes it per domain; a task, goal and the overall figure are the mean of their scenarios' figures (as
RM-Bench's overall is the mean over its domains).

Two style-bias figures compare the variants of the *same* answer: ``prefers_detailed``, how often the detailed
plain variant scores strictly above the concise one, and ``prefers_markdown``, how often the markdown variant
scores strictly above the detailed plain one, each over both the chosen and the rejected answer.

Records made from a BoN item (``set`` "bon": its winner against one loser, a build's ``style.bon``) are scored
alike and reported apart, under ``style.bon`` with the same shape, so that ``style``'s own figures stay those of
the pairwise records.

Intervals: the record is the unit (its cells share a prompt and answers): each figure is a mean over scenarios of
the mean of per-record values in [0, 1], and its 95% interval is ``core/intervals.pooled_interval`` over the
scenarios' records, the macro figures' interval (each scenario's variance its records' own, shrunk toward its
goal's, never below its own with half a win and half a loss added). Estimand: the mean over the group's scenarios
of the figure's expectation over each scenario's population of records. The adjusted-Wald interval used before
(each scenario's variance with a whole 0 and 1 added) covered 94-100% in ``bench/calibration.py``, 98-100% where
scenarios hold 3 records or a figure sits near 0 or 1; this one 94.0-99.7% (``docs/calibration.md``).
"""

from __future__ import annotations

import hashlib
import json
from statistics import fmean
from typing import Any, Iterable, Sequence

import numpy as np

from rmb_build.benchmarks.rmbench import LEVELS, TIE_RULE, difficulty
from rmb_build.core.errors import InputError
from rmb_build.core.intervals import few_item_scenarios, goal_of, pooled_interval
from rmb_build.core.items import Answer, Item, PairwiseItem
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, parse_scenario_id
from rmb_build.evaluate.metrics import aggregate_set
from rmb_build.evaluate.outcomes import predict
from rmb_build.release.style_set import SIDES, STYLES, StyleRecord, orphan_reason

STYLE_PREDICTIONS = "style_predictions.jsonl"  # one row per record, beside predictions.jsonl
AVERAGE = "average"
BIAS = {"prefers_detailed": (1, 0), "prefers_markdown": (2, 1)}  # (variant preferred, variant it is compared to)
FIGURES = (*LEVELS, AVERAGE, *BIAS)
SIZE = len(STYLES)


def style_items(records: Sequence[StyleRecord]) -> list[PairwiseItem]:
    """Per record, in order: its nine matrix cells (chosen[i] vs rejected[j], row by row), then per side the
    two bias comparisons (detailed vs concise, markdown vs detailed), as pairwise items to score."""
    out = []
    for r in records:
        variants = {side: [Answer(f"{side}/{s}", t) for s, t in zip(STYLES, getattr(r, side))] for side in SIDES}
        uid = r.id if r.set_name == PAIRWISE_SET else f"{r.set_name}:{r.id}"  # pair_uid and bon_uid apart
        for i in range(SIZE):
            for j in range(SIZE):
                out.append(
                    PairwiseItem(
                        f"{uid}:{i}{j}", r.conversation, variants["chosen"][i], variants["rejected"][j], r.scenario_id
                    )
                )
        for side in SIDES:
            for name, (hi, lo) in BIAS.items():
                out.append(
                    PairwiseItem(
                        f"{uid}:{side}:{name}", r.conversation, variants[side][hi], variants[side][lo], r.scenario_id
                    )
                )
    return out


PER_RECORD = SIZE * SIZE + len(SIDES) * len(BIAS)


def record_rows(records: Sequence[StyleRecord], predictions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per record (style_predictions.jsonl): its matrix of outcomes, the figures it contributes, and
    its six scores where the RM scores texts one at a time."""
    rows = []
    for k, r in enumerate(records):
        own = predictions[k * PER_RECORD : (k + 1) * PER_RECORD]
        cells = own[: SIZE * SIZE]
        matrix = [[1.0 if cells[i * SIZE + j]["outcome"] == 1.0 else 0.0 for j in range(SIZE)] for i in range(SIZE)]
        row: dict[str, Any] = {"id": r.id, "scenario": r.scenario_id, "file": r.file, "matrix": matrix}
        if r.set_name != PAIRWISE_SET:
            row.update(set=r.set_name, loser=r.loser)
        for level in LEVELS:
            row[level] = fmean(matrix[i][j] for i in range(SIZE) for j in range(SIZE) if difficulty(i, j) == level)
        row[AVERAGE] = fmean(v for line in matrix for v in line)
        bias = own[SIZE * SIZE :]
        for b, name in enumerate(BIAS):
            row[name] = fmean(1.0 if bias[s * len(BIAS) + b]["outcome"] == 1.0 else 0.0 for s in range(len(SIDES)))
        first = cells[0]["scores"]
        if not isinstance(first.get("chosen"), (list, dict)) and all("votes" not in c for c in cells):
            row["scores"] = {
                "chosen": [cells[i * SIZE]["scores"]["chosen"] for i in range(SIZE)],
                "rejected": [cells[j]["scores"]["rejected"] for j in range(SIZE)],
            }
        if any(c.get("failed") for c in own):
            row["failed"] = True
        rows.append(row)
    return rows


def style_sha256(records: Sequence[StyleRecord]) -> str:
    """sha256 over the records' ids, scenarios, conversations and variants: which Style_set was scored."""
    payload = [
        [
            r.scenario_id,
            r.id,
            [[t.role, t.content] for t in r.conversation],
            list(r.chosen),
            list(r.rejected),
            *([r.set_name, r.loser] if r.set_name != PAIRWISE_SET else []),
        ]
        for r in records
    ]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def _group(
    aggs: dict[str, dict[str, Any]], values: dict[str, dict[str, np.ndarray]], kind: str, name: str | None = None
) -> dict[str, Any]:
    """One group's figures (macro over its scenarios) from the per-figure aggregates, each with its interval over
    the records of the group's scenarios (``values``: figure -> scenario -> per-record values)."""
    out: dict[str, Any] = {}
    ci: dict[str, list[float]] = {}
    n = 0
    members = [s for s in next(iter(values.values())) if _member(s, kind, name)]
    for fig, agg in aggs.items():
        g = agg[kind] if name is None else agg[kind][name]
        if kind == "scenarios":
            out[fig], n = g["accuracy"], g["n"]
        else:
            out[fig], n = g["macro"], g["n"]
            out["n_scenarios"] = g["n_scenarios"]
        ci[fig] = pooled_interval([(1 / len(members), values[fig][s], goal_of(s)) for s in members])
    small = few_item_scenarios([len(values[FIGURES[0]][s]) for s in members])
    if small:  # its intervals pool scenarios of few records: conservative there
        out["few_item_scenarios"] = small
    return {**out, "n": n, "ci95": ci}


def _member(scenario: str, kind: str, name: str | None) -> bool:
    sid = parse_scenario_id(scenario)
    return {"scenarios": scenario == name, "tasks": sid.task_id == name, "goals": sid.goal == name}.get(kind, True)


def style_results(rows: Sequence[dict[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    """results.json's ``style``: scenarios, tasks, goals and overall, each with every figure and its ci95, over
    the pairwise records; the BoN records' figures, where there are any, under ``bon`` in the same shape."""
    bon = [r for r in rows if r.get("set") == BON_SET]
    out = _figures([r for r in rows if r.get("set") != BON_SET], resamples, seed)
    if bon:
        out["bon"] = _figures(bon, resamples, seed)
    return out


def _figures(rows: Sequence[dict[str, Any]], resamples: int, seed: int) -> dict[str, Any]:
    aggs = {  # the figures only: the intervals are pooled_interval's (one Monte Carlo draw: unused)
        fig: aggregate_set(
            [{"set": f"style/{fig}", "scenario": r["scenario"], "outcome": r[fig]} for r in rows],
            f"style/{fig}",
            1,
            seed,
        )
        for fig in FIGURES
    }
    values = {
        fig: {s: np.array([r[fig] for r in rows if r["scenario"] == s]) for s in aggs[fig]["scenarios"]}
        for fig in FIGURES
    }
    first = aggs[FIGURES[0]]
    return {
        "scenarios": {s: _group(aggs, values, "scenarios", s) for s in first["scenarios"]},
        "tasks": {t: _group(aggs, values, "tasks", t) for t in first["tasks"]},
        "goals": {g: _group(aggs, values, "goals", g) for g in first["goals"]},
        "overall": _group(aggs, values, "overall") if rows else {},  # only BoN records: no pairwise figure
        "n_records": len(rows),
        "failed_records": sum(bool(r.get("failed")) for r in rows),
        "tie_rule": TIE_RULE,
        "figures": {
            "easy": "chosen in a fancier style than rejected (RM-Bench's cells below the diagonal)",
            "normal": "the same style on both sides",
            "hard": "chosen in a plainer style than rejected (above the diagonal)",
            "average": "the mean of the nine cells",
            "prefers_detailed": "the detailed plain variant scored above the concise one of the same answer",
            "prefers_markdown": "the markdown variant scored above the detailed plain one of the same answer",
            "groups": "a task, goal and overall figure is the mean of its scenarios' figures",
            "ci95": "over records (a record's cells are not independent): the macro figures' interval, each "
            "scenario's variance from its records' values shrunk toward its goal's (core/intervals.pooled_interval)",
        },
    }


def check_records(records: Sequence[StyleRecord], items: Iterable[Item]) -> None:
    """InputError naming the first record made from no item of the release (``release.style_set.orphan_reason``:
    an id no item has, a BoN loser its item lacks); what ``rmb audit`` counts as ``style_orphan``."""
    losers: dict[str, dict[str, int]] = {PAIRWISE_SET: {}, BON_SET: {}}
    for it in items:
        losers.setdefault(it.set_name, {})[str(it.uid)] = len(getattr(it, "losers", ()))
    for rec in records:
        reason = orphan_reason(rec, losers)
        if reason is not None:
            field = "loser" if rec.loser is not None and rec.id in losers.get(rec.set_name, {}) else "id"
            raise InputError(
                rec.file,
                f"{reason}: a style record is made from an item of the release ('rmb audit' lists such "
                "records as style_orphan)",
                item=f"{rec.index} (id {rec.id})",
                field=field,
            )


def score_style(records: Sequence[StyleRecord], score, judge: bool) -> list[dict[str, Any]]:
    """Per-record rows for ``records``: ``score(items) -> (values, keys)`` scores the style items (through the
    run's cache); a tie is wrong (strict) as RM-Bench counts it."""
    items = style_items(records)
    values, keys = score(items)
    return record_rows(records, predict(items, keys, values, ties="strict", judge=judge))


__all__ = [
    "FIGURES",
    "STYLE_PREDICTIONS",
    "check_records",
    "record_rows",
    "score_style",
    "style_items",
    "style_results",
    "style_sha256",
]
