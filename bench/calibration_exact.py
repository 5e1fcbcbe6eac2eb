"""Exact coverage where a calibration row sits outside 93-97%: sums of binomial and Poisson-binomial
probabilities, no draws, beside the least coverage any interval could have there.

A row drawn at one fixed truth whose estimate takes few values (a scenario of n items at one accuracy; a goal
whose scenarios hold one item each, at one release's accuracies) has a coverage that jumps with where the truth
falls among those values. Draws only estimate that number; here it is computed, with:

- ``least``: the least coverage of the truth that any interval whose ends rise with the count can have while it
  still holds the truth with probability at least ``bar`` (93%: the band's floor; 95%: nominal) in the least
  favourable case the data cannot tell apart from this one. For a binomial that case is the truth itself; for
  a goal of one-item scenarios it is every scenario of a cell at the cell's mean accuracy (the binomial, the
  least concentrated of the count's laws of that mean: Hoeffding 1956), since one outcome a scenario cannot
  reveal how the accuracies spread. Any such interval holds a set of counts that is a run ``a..b``;
  ``least`` is the smallest mass of the truth's law over the runs whose least-favourable mass is at least
  ``bar``. Where ``least`` exceeds 97%, no interval reaches the band at that truth without falling under the
  bar at another.
- averaged over accuracies (drawn uniformly from 0.4-0.95, as the suite's "drawn" rows do), the integral over
  a grid: the figure the band applies to.

``rows(seed, releases)`` returns the tables docs/calibration.md and docs/calibration-uncertainty.md show;
``python bench/calibration_exact.py [--releases 200]`` prints them (a few seconds).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any, Callable, Sequence

import numpy as np
from scipy.special import stdtrit
from scipy.stats import binom

from rmb_build.core.intervals import clopper_pearson, macro_interval, mid_p, pooled_interval
from rmb_build.core.taxonomy import PAIRWISE_SET

BAND = (0.93, 0.97)
GRID = np.linspace(0.4, 0.95, 551)  # accuracies 0.4-0.95, 0.001 apart
Interval = Callable[[int, int], Sequence[float]]


def coverage(pmf: np.ndarray, ends: Sequence[Sequence[float]], truth: float) -> float:
    """P(the interval holds ``truth``) when the count k has law ``pmf`` and count k gives ``ends[k]``."""
    return float(sum(p for p, (lo, hi) in zip(pmf, ends) if lo - 1e-12 <= truth <= hi + 1e-12))


def least(here: np.ndarray, worst: np.ndarray, bar: float) -> float:
    """The least mass of ``here`` over runs a..b of counts whose mass under ``worst`` is at least ``bar``."""
    cw, ch = np.concatenate([[0.0], np.cumsum(worst)]), np.concatenate([[0.0], np.cumsum(here)])
    best = 1.0
    for a in range(len(here)):
        b = int(np.searchsorted(cw, cw[a] + bar - 1e-12))  # the shortest run from a reaching the bar
        if b <= len(here):
            best = min(best, float(ch[b] - ch[a]))
    return best


def poisson_binomial(theta: Sequence[float]) -> np.ndarray:
    """The law of the number of wins of independent items with win probabilities ``theta``."""
    pmf = np.array([1.0])
    for t in theta:
        pmf = np.convolve(pmf, [1 - t, t])
    return pmf


# --- one scenario of n items -----------------------------------------------------------------------------------


def fixed_accuracy_rows(sizes=(1, 5, 20, 50, 200), accuracies=(0.75, 0.95)) -> list[dict[str, Any]]:
    """Per (n, accuracy): mid-p's and Clopper-Pearson's exact coverage and the least any interval can have."""
    out = []
    for n in sizes:
        mid, cp = [mid_p(k, n) for k in range(n + 1)], [clopper_pearson(k, n) for k in range(n + 1)]
        for p in accuracies:
            pmf = binom.pmf(np.arange(n + 1), n, p)
            out.append(
                {
                    "case": f"n={n}, accuracy {p}",
                    "mid_p": coverage(pmf, mid, p),
                    "clopper_pearson": coverage(pmf, cp, p),
                    "least_93": least(pmf, pmf, BAND[0]),
                    "least_95": least(pmf, pmf, 0.95),
                }
            )
    return out


def averaged_rows(sizes=(1, 5, 20, 50, 200)) -> list[dict[str, Any]]:
    """Per n, coverage averaged over accuracies uniform on 0.4-0.95 (and its least value on the grid); ``least_93``:
    the average of the least coverage an interval can have at each accuracy while holding 93% at every one."""
    out = []
    for n in sizes:
        k = np.arange(n + 1)
        pmfs = [binom.pmf(k, n, p) for p in GRID]
        by = {}
        for name, method in (("mid_p", mid_p), ("clopper_pearson", clopper_pearson)):
            ends = [method(j, n) for j in k]
            by[name] = np.array([coverage(pmf, ends, p) for pmf, p in zip(pmfs, GRID)])
        out.append(
            {
                "case": f"n={n}, accuracy drawn from 0.4-0.95",
                "mid_p": float(by["mid_p"].mean()),
                "mid_p_min": float(by["mid_p"].min()),
                "clopper_pearson": float(by["clopper_pearson"].mean()),
                "least_93": float(np.mean([least(pmf, pmf, BAND[0]) for pmf in pmfs])),
            }
        )
    return out


# --- goals of one-item scenarios -------------------------------------------------------------------------------


def _uncertainty_module():
    path = Path(__file__).with_name("calibration_uncertainty.py")
    spec = importlib.util.spec_from_file_location("calibration_uncertainty", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def one_item_release(seed: int) -> list[np.ndarray]:
    """The four cells' scenario accuracies of bench/calibration_uncertainty.py's release of one-item scenarios
    at ``seed`` (its first case: ``release_cells(default_rng([seed, 0]), "1 item")``), cells in RMB's order."""
    cal = _uncertainty_module()
    cells: dict[str, list[float]] = {}
    for st, sc, _, t in cal.release_cells(np.random.default_rng([seed, 0]), "1 item"):
        cells.setdefault(f"{st}/{sc.split('/', 1)[0]}", []).append(t)
    return [np.array(cells[c]) for c in cal.RMB_CELLS]


def goal_ends(k_scenarios: int, alone: bool = False) -> list[list[float]]:
    """A goal cell's interval (``macro_interval``; ``alone``: ``pooled_interval`` alone, before the share's mid-p
    joined it) over ``k_scenarios`` one-item scenarios, per count of wins (each reads only the count: every
    scenario's floor is the same, the pool's variance a function of the count)."""
    out = []
    for k in range(k_scenarios + 1):
        outcomes = {f"Harmlessness/S{i + 1}": np.array([1.0 if i < k else 0.0]) for i in range(k_scenarios)}
        if alone:
            out.append(pooled_interval([(1 / k_scenarios, o, "Harmlessness") for o in outcomes.values()]))
        else:
            out.append(macro_interval(list(outcomes), outcomes))
    return out


def overall_ends(counts: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``pooled_interval``'s arithmetic for rmb_overall over cells of one-item scenarios, vectorised over count
    vectors ``counts`` (..., cells): a scenario's variance is its cell's pooled variance ``m (1 - m) (K + 1) / K``
    but at least 1/4 (``plausible_variance``: one item's mid-p interval always holds one half; 1/4 is above the
    floor of 3/16, ``p (1 - p)`` at 3/4 or 1/4), its df 4 (tests/bench/test_calibration_exact.py
    checks this equals ``pooled_interval``)."""
    k, size = np.asarray(counts, dtype=float), np.asarray(sizes, dtype=float)
    m = k / size
    prior = np.maximum(m * (1 - m) * (size + 1) / size, 0.25)
    w = 1 / (len(size) * size)
    var = np.sum(size * w**2 * prior, axis=-1)
    estimate = m.mean(axis=-1)
    dof = var**2 / np.sum(size * (w**2 * prior) ** 2 / 4.0, axis=-1)
    z = NormalDist().inv_cdf(0.975)
    spread = estimate * (1 - estimate)
    sure = spread < 1e-12  # all won or all lost: the weights' own effective size
    n = np.where(sure, 1 / np.sum(w**2 * size), spread / np.where(sure, 1.0, var) * (z / stdtrit(dof, 0.975)) ** 2)
    centre = (estimate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(spread / n + z * z / (4 * n * n))
    return np.maximum(0, np.minimum(estimate, centre - half)), np.minimum(1, np.maximum(estimate, centre + half))


def _joint(pmfs: Sequence[np.ndarray]) -> np.ndarray:
    out = pmfs[0]
    for p in pmfs[1:]:
        out = np.multiply.outer(out, p)
    return out


def _least_over_estimates(here: np.ndarray, worst: np.ndarray, estimate: np.ndarray, bar: float) -> float:
    """``least`` for an interval that is a function of the estimate: runs of the estimate's values in order."""
    order = np.argsort(estimate, kind="stable")
    values, first = np.unique(estimate[order].round(12), return_index=True)
    h = np.add.reduceat(here[order], first)
    w = np.add.reduceat(worst[order], first)
    return least(h, w, bar)


def one_item_rows(seed: int = 0, releases: int = 200) -> list[dict[str, Any]]:
    """The goal cell (pairwise/Harmlessness, 12 one-item scenarios) and rmb_overall (98) at ``seed``'s release
    and averaged over ``releases`` releases (seeds 0 .. releases-1): the toolkit's exact coverage and the least
    any interval can have while holding ``bar`` when each cell's accuracies are equal."""
    sizes = [len(c) for c in one_item_release(seed)]
    goal_index = list(_uncertainty_module().RMB_CELLS).index(f"{PAIRWISE_SET}/Harmlessness")
    goal = goal_ends(sizes[goal_index])
    grids = np.stack(np.meshgrid(*[np.arange(n + 1) for n in sizes], indexing="ij"), axis=-1)
    lo, hi = overall_ends(grids, sizes)
    estimate = (grids / np.asarray(sizes, dtype=float)).mean(axis=-1)
    found: dict[str, list[tuple[float, float, float]]] = {"goal": [], "overall": []}
    at_seed = {}
    for r in sorted({seed, *range(releases)}):
        cells = one_item_release(r)
        here = [poisson_binomial(c) for c in cells]
        worst = [binom.pmf(np.arange(len(c) + 1), len(c), c.mean()) for c in cells]
        g, g_worst, truth = here[goal_index], worst[goal_index], float(cells[goal_index].mean())
        goal_row = (coverage(g, goal, truth), least(g, g_worst, 0.93), least(g, g_worst, 0.95))
        joint, joint_worst = _joint(here), _joint(worst)
        t = float(np.mean([c.mean() for c in cells]))
        held = float(joint[(lo <= t + 1e-12) & (t - 1e-12 <= hi)].sum())
        flat = joint.ravel(), joint_worst.ravel(), estimate.ravel()
        overall_row = (held, _least_over_estimates(*flat, 0.93), _least_over_estimates(*flat, 0.95))
        if r == seed:
            at_seed = {"goal": goal_row, "overall": overall_row}
        if r < releases:
            found["goal"].append(goal_row)
            found["overall"].append(overall_row)
    out = []
    for key, label in (
        ("overall", "rmb_overall ci95, 98 scenarios of 1 item"),
        ("goal", "macro ci95 (a goal cell), 12 scenarios of 1 item"),
    ):
        out.append(
            {"case": f"{label}, seed {seed}'s release", **dict(zip(("toolkit", "least_93", "least_95"), at_seed[key]))}
        )
        v = np.array(found[key])
        out.append(
            {
                "case": f"{label}, averaged over {releases} releases",
                "toolkit": float(v[:, 0].mean()),
                "toolkit_min": float(v[:, 0].min()),
                "toolkit_max": float(v[:, 0].max()),
                "least_93": float(v[:, 1].mean()),
                "least_95": float(v[:, 2].mean()),
            }
        )
    return out


def equal_accuracy_rows(scenario_counts=(2, 3, 4, 6, 12, 37)) -> list[dict[str, Any]]:
    """A goal of one-item scenarios all of one accuracy (the least favourable truth: a binomial count), the
    accuracy over the grid: the toolkit's coverage on average and at its least, beside ``pooled_interval`` alone
    and mid-p of the count."""
    out = []
    for k in scenario_counts:
        pmfs = [binom.pmf(np.arange(k + 1), k, p) for p in GRID]
        row: dict[str, Any] = {"case": f"{k} one-item scenarios, one accuracy drawn from 0.4-0.95"}
        for name, ends in (
            ("toolkit", goal_ends(k)),
            ("pooled_alone", goal_ends(k, alone=True)),
            ("mid_p", [mid_p(j, k) for j in range(k + 1)]),
        ):
            held = np.array([coverage(pmf, ends, p) for pmf, p in zip(pmfs, GRID)])
            row.update({name: float(held.mean()), f"{name}_min": float(held.min())})
        out.append(row)
    return out


def rows(seed: int = 0, releases: int = 200) -> dict[str, list[dict[str, Any]]]:
    return {
        "fixed accuracy": fixed_accuracy_rows(),
        "averaged over accuracies": averaged_rows(),
        "one-item goals": one_item_rows(seed, releases),
        "one-item goals at one accuracy": equal_accuracy_rows(),
    }


def markdown(table: Sequence[dict[str, Any]]) -> str:
    keys = list(dict.fromkeys(k for r in table for k in r if k != "case"))
    lines = ["| case | " + " | ".join(keys) + " |", "| --- |" + " ---: |" * len(keys)]
    for r in table:
        lines.append(f"| {r['case']} | " + " | ".join(f"{100 * r[k]:.1f}" if k in r else "–" for k in keys) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--releases", type=int, default=200)
    args = ap.parse_args(argv)
    for name, table in rows(args.seed, args.releases).items():
        print(f"\n{name} (percent)\n\n{markdown(table)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
