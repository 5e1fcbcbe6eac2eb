"""Aggregate item outcomes into results.json: per scenario, task, goal and overall.

macro = mean of the group's scenario accuracies; micro = mean over the group's items. Harmlessness
scenarios belong to no task. 95% intervals come from ``rmb_build/core/intervals.py``: mid-p for
a proportion (with ties counted half, Wilson's interval at the outcomes' own effective size), and for macro
means and ``rmb_overall`` Wilson's interval with each scenario's variance shrunk toward its goal's pooled one;
none has zero width. A figure over fewer than ``FEW_ITEMS`` items carries ``"few_items": true``; a macro over
several scenarios some of which hold fewer than ``FEW_ITEMS`` carries ``"few_item_scenarios": <how many>``: its
interval is conservative there (over 95%), calibrated where every scenario holds ``FEW_ITEMS`` or more
(docs/calibration.md).

``rmb_overall`` is RMB's headline: the four cells (pairwise/BoN x Helpfulness/Harmlessness), each
that set's goal ``macro``, and their plain mean; ``few_items`` lists the cells resting on few items,
``few_item_scenarios`` counts, per cell and under the mean, the scenarios of few items its interval pools.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np

from rmb_build.core.intervals import (
    DEFAULT_DRAWS,
    FEW_ITEMS,
    Draws,
    few_item_scenarios,
    few_items,
    macro_interval,
    mean_interval,
    pooled_interval,
    scenario_draws,
)
from rmb_build.core.intervals import METHOD as INTERVAL_METHOD
from rmb_build.core.taxonomy import BON_SET, GOALS, PAIRWISE_SET, all_scenarios, parse_scenario_id

SCHEMA_VERSION = 1
DEFAULT_RESAMPLES = DEFAULT_DRAWS
RMB_CELLS = tuple(f"{s}/{g}" for s in (PAIRWISE_SET, BON_SET) for g in GOALS)


def scenario_order(ids: Sequence[str]) -> list[str]:
    """Scenario ids in RMB's order (by task, then S1..S11, multi); unknown ids last, sorted."""
    rank = {s.id: i for i, s in enumerate(all_scenarios())}
    return sorted(ids, key=lambda s: (rank.get(s, len(rank)), s))


def goals_of(scenarios: Sequence[str]) -> dict[str, list[str]]:
    """Scenario ids per goal, goals in RMB's order."""
    goals: dict[str, list[str]] = defaultdict(list)
    for s in scenarios:
        goals[parse_scenario_id(s).goal].append(s)
    return {g: goals[g] for g in [g for g in GOALS if g in goals] + sorted(g for g in goals if g not in GOALS)}


@dataclass
class SetDraws:
    """One set's per-scenario outcomes and accuracies (scenarios in RMB's order). ``n_draws`` and ``seed`` set the
    Monte Carlo draws of the intervals the rules of ``core.intervals`` replaced: made only when asked for
    (``draws``), since no figure reads them."""

    outcomes: dict[str, np.ndarray]
    accuracy: dict[str, float]
    chance: dict[str, float | None]
    n_draws: int
    seed: int
    set_name: str = ""

    @cached_property
    def draws(self) -> dict[str, Draws]:
        """Each scenario's lower and upper draws, seeded per set and scenario (the bench's rows of the replaced
        Monte Carlo intervals read them; evaluate's 4,000 a scenario were made and never read)."""
        return {s: scenario_draws(o, self.n_draws, self.seed, f"{self.set_name}/{s}") for s, o in self.outcomes.items()}

    @property
    def scenarios(self) -> list[str]:
        return list(self.outcomes)

    def goals(self) -> dict[str, list[str]]:
        return goals_of(self.scenarios)

    def macro(self, members: Sequence[str]) -> tuple[float, list[float]]:
        """The group's macro accuracy and its 95% interval (``core.intervals.macro_interval``).

        Estimand: the mean of the members' accuracies, each over its scenario's population of items."""
        return (
            float(np.mean([self.accuracy[s] for s in members])),
            macro_interval(members, self.outcomes),
        )

    def micro(self, members: Sequence[str], stratum: str) -> tuple[float, list[float]]:
        """The group's micro accuracy (the mean over its items) and its 95% interval (``ci95_micro``).

        Estimand: ``sum_s n_s theta_s / N``, the expected outcome of the group's items drawn as the release's were
        (each scenario's ``n_s`` items from its own population, the sizes fixed). The interval is one group's
        (``core.intervals.mean_interval``: mid-p of the pooled wins, ``ties_interval`` with ties counted half),
        which treats the items as one sample and ignores the fixed sizes: it holds the band where the scenarios'
        accuracies are alike and is conservative where they differ (bench/calibration.py's ``micro_checks``)."""
        pooled = np.concatenate([self.outcomes[s] for s in members])
        return float(pooled.mean()), mean_interval(pooled, self.n_draws, self.seed, stratum)


def set_draws(
    predictions: Sequence[Mapping[str, Any]], set_name: str, draws: int = DEFAULT_RESAMPLES, seed: int = 0
) -> SetDraws:
    """Each scenario of ``set_name``: outcomes and accuracy (its draws made when asked for)."""
    by_scenario: dict[str, list[float]] = defaultdict(list)
    chances: dict[str, list[float]] = defaultdict(list)
    for p in predictions:
        if p["set"] == set_name:
            by_scenario[p["scenario"]].append(float(p["outcome"]))
            if p.get("chance") is not None:
                chances[p["scenario"]].append(float(p["chance"]))
    outcomes = {s: np.asarray(by_scenario[s]) for s in scenario_order(list(by_scenario))}
    return SetDraws(
        outcomes=outcomes,
        accuracy={s: float(o.mean()) for s, o in outcomes.items()},
        chance={s: (float(np.mean(chances[s])) if len(chances[s]) == len(o) else None) for s, o in outcomes.items()},
        n_draws=draws,
        seed=seed,
        set_name=set_name,
    )


def aggregate_set(
    predictions: Sequence[Mapping[str, Any]],
    set_name: str,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    samples: SetDraws | None = None,
) -> dict[str, Any]:
    """``{"scenarios", "tasks", "goals", "overall"}`` for one set's predictions."""
    sm = samples if samples is not None else set_draws(predictions, set_name, resamples, seed)
    out: dict[str, Any] = {"scenarios": {}, "tasks": {}, "goals": {}, "overall": {}}
    scenarios = sm.scenarios
    if not scenarios:
        return out
    n = {s: len(sm.outcomes[s]) for s in scenarios}
    for s in scenarios:
        out["scenarios"][s] = {"accuracy": sm.accuracy[s], "n": n[s], "ci95": sm.macro([s])[1]}
        if few_items(n[s]):
            out["scenarios"][s]["few_items"] = True
        if sm.chance[s] is not None:
            out["scenarios"][s]["chance"] = sm.chance[s]

    def group(name: str, members: list[str]) -> dict[str, Any]:
        total = sum(n[s] for s in members)
        macro, ci_macro = sm.macro(members)
        micro, ci_micro = sm.micro(members, f"{set_name}/{name}/micro")
        row = {
            "macro": macro,
            "micro": micro,
            "n": total,
            "n_scenarios": len(members),
            "ci95_macro": ci_macro,
            "ci95_micro": ci_micro,
        }
        if few_items(total):
            row["few_items"] = True
        small = few_item_scenarios([n[s] for s in members])
        if small:
            row["few_item_scenarios"] = small
        return row

    tasks: dict[str, list[str]] = defaultdict(list)
    for s in scenarios:
        task = parse_scenario_id(s).task_id
        if task:
            tasks[task].append(s)
    out["tasks"] = {t: group(t, m) for t, m in tasks.items()}
    out["goals"] = {g: group(g, m) for g, m in sm.goals().items()}
    out["overall"] = group("overall", scenarios)
    if len(out["goals"]) > 1:
        # Reported beside, never instead of, `overall` (which is over all scenarios / items).
        out["mean_of_goals"] = {
            "macro": float(np.mean([g["macro"] for g in out["goals"].values()])),
            "micro": float(np.mean([g["micro"] for g in out["goals"].values()])),
        }
    return out


def rmb_overall(samples: Mapping[str, SetDraws]) -> dict[str, Any]:
    """RMB's headline: four cells (each a set's goal macro) and their mean, with 95% intervals.

    Estimand: the mean over the cells present of each cell's mean scenario accuracy, a scenario's accuracy
    being over its population of items (scenarios fixed, items a sample of each). Its interval:
    ``core.intervals.pooled_interval``, each scenario's variance shrunk toward its goal's pooled one, so that a
    scenario of one item counts with its goal's spread (an item bootstrap gives it none), never below what its own
    items allow. A cell the release lacks is
    null, listed in ``missing``; the mean is over the cells present.
    """
    cells: dict[str, tuple[float, list[float], int, list[str], SetDraws]] = {}
    for set_name, sm in samples.items():
        for goal, members in sm.goals().items():
            cell = f"{set_name}/{goal}"
            if cell in RMB_CELLS:
                cells[cell] = (*sm.macro(members), sum(len(sm.outcomes[s]) for s in members), members, sm)
    missing = [c for c in RMB_CELLS if c not in cells]
    out: dict[str, Any] = {
        "cells": {c: cells[c][0] if c in cells else None for c in RMB_CELLS},
        "mean": None,
        "ci95": {c: cells[c][1] if c in cells else None for c in RMB_CELLS},
        "n": {c: cells[c][2] if c in cells else 0 for c in RMB_CELLS},
        "missing": missing,
    }
    out["few_items"] = [c for c in RMB_CELLS if c in cells and few_items(cells[c][2])]
    # scenarios of few items under a pooled (conservative) interval: a cell's own, and all of them under the mean's
    sizes = {c: [len(sm.outcomes[s]) for s in members] for c, (*_, members, sm) in cells.items()}
    # (the mean's interval is pooled_interval's even over one scenario)
    out["few_item_scenarios"] = {c: few_item_scenarios(sizes.get(c, [])) for c in RMB_CELLS} | {
        "mean": sum(few_items(k) for cell in sizes.values() for k in cell)
    }
    if cells:
        out["mean"] = float(np.mean([v[0] for v in cells.values()]))
        parts = [
            (1.0 / (len(cells) * len(members)), sm.outcomes[s], cell)
            for cell, (_, _, _, members, sm) in cells.items()
            for s in members
        ]
        out["ci95"]["mean"] = pooled_interval(parts)
    else:
        out["ci95"]["mean"] = None
    return out


def build_results(
    predictions: Sequence[Mapping[str, Any]],
    *,
    rm: str,
    release: str,
    ties: str,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    **extra: object,
) -> dict[str, Any]:
    """The results.json object; ``extra`` fields (scoring counts, bias breakdowns) are added at the end."""
    if resamples < 1:
        raise ValueError("the intervals need at least one draw")
    samples = {s: set_draws(predictions, s, resamples, seed) for s in (PAIRWISE_SET, BON_SET)}
    return {
        "schema_version": SCHEMA_VERSION,
        "rm": rm,
        "release": release,
        "ties": ties,
        # "bootstrap" keeps its contracted name; the draws are the intervals' Monte Carlo draws.
        "bootstrap": {"resamples": resamples, "seed": seed},
        **{s: aggregate_set(predictions, s, resamples, seed, samples[s]) for s in samples},
        "rmb_overall": rmb_overall(samples),
        "intervals": {"method": INTERVAL_METHOD, "draws": resamples, "seed": seed, "few_items_below": FEW_ITEMS},
        **extra,
    }
