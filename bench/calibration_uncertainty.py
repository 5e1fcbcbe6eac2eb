"""Calibration of the uncertainty the toolkit prints: each interval and test run on data drawn from a known truth.

Per estimator and case: the truth, the mean estimate, its bias, the share of draws whose nominal 95% interval
covers the truth (``coverage95``) and the interval's mean width. For a test the "interval" is its acceptance
region: ``coverage95`` of compare's p-value is the share of draws with p >= 0.05 when the two RMs have equal
accuracy (1 - the type-I rate), of "separated" the share of draws in which two equal-accuracy RMs are not
called separated, of a rank interval the share of (draw, RM) whose true rank it holds.

The truth: every RMB scenario (37 Helpfulness, 12 Harmlessness) in both sets, a fixed accuracy per scenario
(uniform 0.4 to 0.95, seeded per case), each item an independent draw of the scenario's population (its outcome
Bernoulli of that accuracy; with ties, 0.5 with a fixed share). Two RMs share half of their items' luck (the
same uniform decides both outcomes on a random half of the items), as RMs do on easy and hard items.

``checks(draws, seed)`` returns the rows (``bench/calibration.py`` runs it beside the other estimators);
``replaced(draws, seed)`` the rows of the methods these replaced. Run: ``python bench/calibration_uncertainty.py
--draws 400`` (a markdown table, then one JSON line); docs/calibration-uncertainty.md holds the table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from rmb_build.core.intervals import scenario_draws, weighted_interval
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, all_scenarios
from rmb_build.evaluate.compare import compare_pairs, paired_by_uid
from rmb_build.evaluate.metrics import RMB_CELLS, rmb_overall, set_draws
from rmb_build.leaderboard.rank_intervals import rank_uncertainty
from rmb_build.leaderboard.ranking import pair_test_of_rows

SIZE_CASES: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "1 item": lambda rng, k: np.ones(k, dtype=int),
    "1-4 items": lambda rng, k: rng.integers(1, 5, k),
    "5 items": lambda rng, k: np.full(k, 5),
    "20 items": lambda rng, k: np.full(k, 20),
    "200 items": lambda rng, k: np.full(k, 200),
    "1-200 items": lambda rng, k: rng.integers(1, 201, k),
}
TINY = "1-4 items"
COMPARE_DRAWS = 2000  # Monte Carlo draws of each compare (its default is 10,000)
OVERALL_ESTIMAND = (
    "the mean over RMB's four cells of each cell's mean scenario accuracy, a scenario's accuracy over its "
    "population of items (scenarios fixed, items sampled)"
)
CELL_ESTIMAND = "a goal cell's mean of its scenarios' accuracies, each over its scenario's population of items"
DIFF_ESTIMAND = "the difference of two RMs' expected rmb_overall (the estimand above), on items both scored"
RANK_ESTIMAND = "an RM's rank by expected rmb_overall: 1 + the RMs whose expected figure is strictly higher"


def _row(estimator: str, estimand: str, case: str, truth: float, estimates, covered, widths) -> dict[str, Any]:
    estimates, covered, widths = (np.asarray(x, dtype=float) for x in (estimates, covered, widths))
    mean = float(np.mean(estimates))
    return {
        "estimator": estimator,
        "estimand": estimand,
        "case": case,
        "draws": int(len(covered)),
        "truth": float(truth),
        "mean_estimate": mean,
        "bias": mean - float(truth),
        "coverage95": float(np.mean(covered)),
        "mean_width": float(np.mean(widths)),
    }


# --- the known truth ------------------------------------------------------------------------------------------


def release_cells(rng: np.random.Generator, sizes: str) -> list[tuple[str, str, int, float]]:
    """(set, scenario, items, accuracy) of every RMB scenario in both sets: a release of known truth."""
    ids = [s.id for s in all_scenarios()]
    n = SIZE_CASES[sizes](rng, 2 * len(ids))
    theta = rng.uniform(0.4, 0.95, 2 * len(ids))
    sets = [PAIRWISE_SET] * len(ids) + [BON_SET] * len(ids)
    return [(st, sc, int(k), float(t)) for st, sc, k, t in zip(sets, ids + ids, n, theta)]


def truth_overall(cells: Sequence[tuple[str, str, int, float]], shift: Callable[[str], float] = lambda g: 0.0) -> float:
    """The estimand: the mean over the four cells of their mean scenario accuracy (accuracies shifted by goal)."""
    by_cell: dict[str, list[float]] = {}
    for st, sc, _, t in cells:
        goal = sc.split("/", 1)[0]
        by_cell.setdefault(f"{st}/{goal}", []).append(min(1.0, t + shift(goal)))
    return float(np.mean([np.mean(v) for c, v in by_cell.items() if c in RMB_CELLS]))


def draw_predictions(
    rng: np.random.Generator,
    cells: Sequence[tuple[str, str, int, float]],
    ties: float = 0.0,
    luck: np.ndarray | None = None,
    shift: float = 0.0,
) -> list[dict[str, Any]]:
    """One RM's predictions rows on the release: each outcome Bernoulli of its scenario's accuracy (+ ``shift``);
    ``ties``: that share of outcomes 0.5 (accuracy kept); ``luck``: each item's uniform, shared with another RM."""
    rows, k = [], 0
    for st, sc, n, t in cells:
        u = luck[k : k + n] if luck is not None else rng.random(n)
        k += n
        acc = min(1.0, t + shift)
        win = max(0.0, acc - ties / 2)
        outcome = np.where(u < win, 1.0, np.where(u < win + ties, 0.5, 0.0))
        rows += [{"set": st, "scenario": sc, "uid": f"{sc}#{i}", "outcome": float(o)} for i, o in enumerate(outcome)]
    return rows


def shared_luck(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two RMs' per-item uniforms, equal on a random half of the items (correlated RMs, marginals kept)."""
    a, b = rng.random(n), rng.random(n)
    same = rng.random(n) < 0.5
    return a, np.where(same, a, b)


# --- rmb_overall and the macro intervals -----------------------------------------------------------------------


def _samples(rows: list[dict[str, Any]]):
    return {s: set_draws(rows, s, draws=50) for s in (PAIRWISE_SET, BON_SET)}


def overall_rows(draws: int, seed: int, sizes: Sequence[str] = tuple(SIZE_CASES)) -> list[dict[str, Any]]:
    """``rmb_overall``'s interval and a goal cell's macro interval (``pairwise/Harmlessness``: 12 scenarios)."""
    out = []
    for case in sizes:
        for ties in (0.0, 0.3) if case == TINY else (0.0,):
            rng = np.random.default_rng([seed, len(out)])
            cells = release_cells(rng, case)
            truth = truth_overall(cells)
            cell_truth = float(np.mean([t for st, sc, _, t in cells if st == PAIRWISE_SET and sc.startswith("Harm")]))
            est, cov, wid, c_est, c_cov, c_wid = [], [], [], [], [], []
            for _ in range(draws):
                result = rmb_overall(_samples(draw_predictions(rng, cells, ties)))
                lo, hi = result["ci95"]["mean"]
                est.append(result["mean"])
                cov.append(lo <= truth <= hi)
                wid.append(hi - lo)
                cell = f"{PAIRWISE_SET}/Harmlessness"
                lo, hi = result["ci95"][cell]
                c_est.append(result["cells"][cell])
                c_cov.append(lo <= cell_truth <= hi)
                c_wid.append(hi - lo)
            suffix = ", 30% ties counted half" if ties else ""
            out.append(
                _row("rmb_overall ci95", OVERALL_ESTIMAND, f"98 scenarios of {case}{suffix}", truth, est, cov, wid)
            )
            out.append(
                _row(
                    "macro ci95 (a goal cell)",
                    CELL_ESTIMAND,
                    f"12 scenarios of {case}{suffix}",
                    cell_truth,
                    c_est,
                    c_cov,
                    c_wid,
                )
            )
    return out


def simulated_sd(cells: Sequence[tuple[str, str, int, float]], draws: int, seed: int) -> float:
    """The SD of ``rmb_overall`` over draws from the known truth (what an interval's width should reflect)."""
    rng = np.random.default_rng([seed, 7])
    values = []
    for _ in range(draws):
        by_cell: dict[str, list[float]] = {}
        for st, sc, n, t in cells:
            by_cell.setdefault(f"{st}/{sc.split('/', 1)[0]}", []).append(float(np.mean(rng.random(n) < t)))
        values.append(np.mean([np.mean(v) for v in by_cell.values()]))
    return float(np.std(values))


# --- compare, separated, rank intervals -----------------------------------------------------------------------


def _pair(rng, cells, shift_b: float = 0.0) -> list[tuple[str, str, float, float]]:
    total = sum(n for _, _, n, _ in cells)
    ua, ub = shared_luck(rng, total)
    a = draw_predictions(rng, cells, luck=ua)
    b = draw_predictions(rng, cells, luck=ub, shift=shift_b)
    return paired_by_uid(a, b)


def compare_rows(
    draws: int, seed: int, sizes: Sequence[str] = (TINY, "20 items", "1-200 items")
) -> list[dict[str, Any]]:
    """``rmb compare``'s interval of the rmb_overall difference (B 5 points better) and its p-value (equal RMs)."""
    out = []
    for case in sizes:
        rng = np.random.default_rng([seed, 100 + len(out)])
        cells = release_cells(rng, case)
        truth = truth_overall(cells) - truth_overall(cells, lambda g: 0.05)
        est, cov, wid, p_est, p_cov, p_wid = [], [], [], [], [], []
        for _ in range(draws):
            test = compare_pairs(_pair(rng, cells, 0.05), COMPARE_DRAWS, int(rng.integers(1 << 30)))["rmb_overall"]
            lo, hi = test["ci95"]
            est.append(test["diff"])
            cov.append(lo <= truth <= hi)
            wid.append(hi - lo)
            null = compare_pairs(_pair(rng, cells), COMPARE_DRAWS, int(rng.integers(1 << 30)))["rmb_overall"]
            p_est.append(null["p"])
            p_cov.append(null["p"] >= 0.05)
            p_wid.append(null["ci95"][1] - null["ci95"][0])
        out.append(
            _row(
                "compare ci95 (rmb_overall A-B)",
                DIFF_ESTIMAND,
                f"98 scenarios of {case}, B +5 points",
                truth,
                est,
                cov,
                wid,
            )
        )
        out.append(
            _row(
                "compare p-value (share p >= 0.05)",
                "no difference between two RMs of equal accuracy (coverage95 = 1 - type-I rate; mean_estimate = mean p)",
                f"98 scenarios of {case}, equal accuracy",
                0.0,
                p_est,
                p_cov,
                p_wid,
            )
        )
    return out


def _entry(slug: str, mean: float):
    return SimpleNamespace(slug=slug, rm=slug, values={"mean": mean}, folder=Path(slug))


def board(rows: Sequence[list[dict[str, Any]]], resamples: int, seed: int) -> dict[str, Any]:
    """What the leaderboard computes for RMs with these predictions: rank intervals and separability, from the
    same pairwise tests as its "vs. next" column (``ranking.pair_test_of_rows``)."""
    means = [rmb_overall(_samples(list(r)))["mean"] for r in rows]
    order = sorted(range(len(rows)), key=lambda i: -means[i])
    entries = [_entry(f"rm{i}", means[i]) for i in order]
    tests = {
        (a.slug, b.slug): pair_test_of_rows(a, b, rows[order[i]], rows[order[j]], resamples, seed)
        for i, a in enumerate(entries)
        for j, b in enumerate(entries)
        if j > i
    }
    return rank_uncertainty(entries, tests, resamples, seed)  # type: ignore[arg-type]


def rank_rows(draws: int, seed: int, sizes: Sequence[str] = (TINY, "20 items")) -> list[dict[str, Any]]:
    """Four RMs (two of equal accuracy, one 3 points, one 10 points better): rank intervals and "separated"."""
    shifts = (0.0, 0.0, 0.03, 0.10)
    out = []
    for case in sizes:
        rng = np.random.default_rng([seed, 200 + len(out)])
        cells = release_cells(rng, case)
        truths = [truth_overall(cells, lambda g, s=s: s) for s in shifts]
        true_rank = [1 + sum(t > x + 1e-12 for t in truths) for x in truths]
        total = sum(n for _, _, n, _ in cells)
        cov, wid, sep = [], [], []
        for _ in range(draws):
            base = rng.random(total)
            rows = []
            for s in shifts:
                own = rng.random(total)
                luck = np.where(rng.random(total) < 0.5, base, own)
                rows.append(draw_predictions(rng, cells, luck=luck, shift=s))
            got = board(rows, COMPARE_DRAWS, int(rng.integers(1 << 30)))
            for i in range(len(shifts)):
                lo, hi = got["ranks"][f"rm{i}"]["rank_ci"]
                cov.append(lo <= true_rank[i] <= hi)
                wid.append(hi - lo + 1)
            pair = {tuple(sorted(d[:2])): d[2] for d in got["separability"]["detail"]}
            sep.append(not pair[("rm0", "rm1")])
        out.append(
            _row(
                "rank interval",
                RANK_ESTIMAND,
                f"4 RMs (+0, +0, +3, +10 points), 98 scenarios of {case}",
                0.0,
                [0.0] * len(cov),
                cov,
                wid,
            )
        )
        out.append(
            _row(
                '"separated" (share not separated)',
                "no separation of two RMs of equal accuracy",
                f"the two equal RMs of that board, 98 scenarios of {case}",
                0.0,
                [1.0 - s for s in sep],
                sep,
                [0.0] * len(sep),
            )
        )
    return out


# --- the downstream correlations -------------------------------------------------------------------------------


def downstream_rows(draws: int, seed: int, rms: Sequence[int] = (8, 12, 20), rho: float = 0.6) -> list[dict[str, Any]]:
    """``rmb downstream``'s correlation intervals (benchmark figure vs. downstream score across RMs) when the RMs'
    figure and expected downstream score are bivariate normal with correlation ``rho`` (100 prompts each, grade
    noise small beside the spread between RMs)."""
    from rmb_build.analysis.downstream.best_of_k import correlate

    truths = {
        "pearson": rho,
        "spearman": 6 / math.pi * math.asin(rho / 2),
        "kendall": 2 / math.pi * math.asin(rho),
    }
    out = []
    for m in rms:
        rng = np.random.default_rng([seed, 300 + m])
        got: dict[str, list[list[float] | None]] = {k: [] for k in truths}
        values: dict[str, list[float]] = {k: [] for k in truths}
        for _ in range(draws):
            z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=m)
            per_prompt = z[:, 1:2] + rng.normal(0, 0.5, size=(m, 100))
            result = correlate(z[:, 0], per_prompt, resamples=500, seed=int(rng.integers(1 << 30)))
            for k in truths:
                got[k].append(result[k]["ci95"])
                values[k].append(result[k]["value"])
        for k, truth in truths.items():
            cis = got[k]
            refused = sum(c is None for c in cis)
            cov = [c is not None and c[0] <= truth <= c[1] for c in cis]
            out.append(
                _row(
                    f"downstream {k} ci95",
                    f"the {k} correlation, across a population of RMs, of a benchmark figure and the RM's expected "
                    "downstream score",
                    f"{m} RMs, correlation {rho}"
                    + (f" ({refused} of {len(cis)} intervals refused)" if refused else ""),
                    truth,
                    [v for v in values[k] if v is not None],
                    cov,
                    [c[1] - c[0] for c in cis if c is not None] or [0.0],
                )
            )
    return out


def checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """Every row: rmb_overall's and the macro intervals, compare's interval and p, rank intervals and "separated",
    the downstream correlations' intervals."""
    return [
        *overall_rows(draws, seed),
        *compare_rows(max(1, draws // 4), seed),
        *rank_rows(max(1, draws // 8), seed),
        *downstream_rows(max(1, draws // 4), seed),
    ]


# --- the methods replaced --------------------------------------------------------------------------------------


def replaced(draws: int, seed: int, sizes: Sequence[str] = (TINY, "20 items")) -> list[dict[str, Any]]:
    """The methods these replaced, on the same truth: rmb_overall by Monte Carlo Clopper-Pearson (main at
    9435483) and the leaderboard's item bootstrap (percentile interval of rmb_overall)."""
    out = []
    for case in sizes:
        rng = np.random.default_rng([seed, len(out)])
        cells = release_cells(rng, case)
        truth = truth_overall(cells)
        rows_mc, rows_boot = ([], [], []), ([], [], [])
        for t in range(draws):
            rows = draw_predictions(rng, cells)
            samples = _samples(rows)
            parts, by_cell = [], {}
            for st, sm in samples.items():
                for goal, members in sm.goals().items():
                    by_cell[f"{st}/{goal}"] = [sm.outcomes[s] for s in members]
            for st, sm in samples.items():
                for members in sm.goals().values():
                    w = 1.0 / (len(by_cell) * len(members))
                    parts += [(w, scenario_draws(sm.outcomes[s], 1000, t, f"{st}/{s}")) for s in members]
            mean = rmb_overall(samples)["mean"]
            lo, hi = weighted_interval(parts)
            for acc, x in zip(rows_mc, (mean, lo <= truth <= hi, hi - lo)):
                acc.append(x)
            boot = np.mean(
                [
                    np.mean([o[rng.integers(0, len(o), size=(500, len(o)))].mean(axis=1) for o in m], axis=0)
                    for m in by_cell.values()
                ],
                axis=0,
            )
            lo, hi = np.quantile(boot, [0.025, 0.975])
            for acc, x in zip(rows_boot, (mean, lo <= truth <= hi, hi - lo)):
                acc.append(x)
        label = f"98 scenarios of {case}"
        out.append(
            _row("rmb_overall ci95, Monte Carlo Clopper-Pearson (replaced)", OVERALL_ESTIMAND, label, truth, *rows_mc)
        )
        out.append(
            _row("rmb_overall, item bootstrap percentile (replaced)", OVERALL_ESTIMAND, label, truth, *rows_boot)
        )
    return out


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    head = "| estimator | case | draws | truth | mean estimate | bias | coverage95 | mean width |"
    lines = [head, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['estimator']} | {r['case']} | {r['draws']} | {r['truth']:.3f} | {r['mean_estimate']:.3f} | "
            f"{r['bias']:+.3f} | {r['coverage95']:.3f} | {r['mean_width']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replaced", action="store_true", help="also the rows of the methods replaced")
    args = parser.parse_args(argv)
    start = time.time()
    rows = checks(args.draws, args.seed) + (replaced(max(1, args.draws // 2), args.seed) if args.replaced else [])
    print(markdown(rows))
    out_of_band = [f"{r['estimator']} / {r['case']}" for r in rows if not 0.93 <= r["coverage95"] <= 0.97]
    print(json.dumps({"seconds": round(time.time() - start, 1), "rows": len(rows), "outside_93_97": out_of_band}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
