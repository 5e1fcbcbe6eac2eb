"""The calibration suite: every estimator `rmb evaluate` prints, run on data drawn from a known truth, with its
bias and the coverage of its nominal 95% interval.

Each check is a function ``(draws, seed) -> list of rows`` in one shape (``ROW_KEYS``): the estimator, its
estimand in one sentence, the case, the draws, the truth (averaged over draws where it is conditional on the
draw), the mean estimate, the bias, the share of draws whose 95% interval holds the truth and the interval's
mean width; ``refused`` is the share of draws that gave no figure (those count neither way). A truth held
exactly by every draw's estimate (a scorer that is a function of length alone) covers trivially: the row says
``deterministic``. ``bench/calibration_uncertainty.py``, where present, adds its own ``checks(draws, seed)``
(compare, rank intervals, separability, downstream) in the same shape.

Run: ``python bench/calibration.py [--draws 2000] [--seed 0] [--markdown]`` (the table in
``docs/calibration.md`` is ``--draws 2000 --markdown``); ``tests/bench/test_calibration.py`` runs every check on
small draws in the quick tier.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from rmb_build.core.intervals import adjusted_wald, mean_interval, pooled_interval
from rmb_build.evaluate.length_control import length_neutral
from rmb_build.evaluate.metrics import rmb_overall, set_draws
from rmb_build.evaluate.style import BIAS
from rmb_build.evaluate.style import _figures as style_figures

ROW_KEYS = ("estimator", "estimand", "case", "draws", "truth", "mean_estimate", "bias", "coverage95", "mean_width")
MC_DRAWS = 1000  # the intervals' own Monte Carlo draws inside each calibration draw (evaluate's default is 4000)
STYLE_DRAWS = 300  # at most, for the style checks: each draw scores six figures' groups (about 0.5 s)
TRUTH_RECORDS = 200_000  # records drawn once to compute a style case's population figures
Check = Callable[[int, int], list[dict[str, Any]]]


def summarise(
    estimator: str, estimand: str, case: str, truths: Sequence[float], estimates: Sequence[float | None], cis
) -> dict[str, Any]:
    """One row from per-draw truths, estimates (None: refused) and intervals."""
    kept = [i for i, e in enumerate(estimates) if e is not None]
    t = np.asarray(truths, dtype=float)
    known = t[kept] if kept else t
    row: dict[str, Any] = {
        "estimator": estimator,
        "estimand": estimand,
        "case": case,
        "draws": len(truths),
        "truth": float(np.nanmean(known)) if np.isfinite(known).any() else None,
        "mean_estimate": None,
        "bias": None,
        "coverage95": None,
        "mean_width": None,
        "refused": 1 - len(kept) / len(truths),
    }
    if kept:
        e = np.asarray([estimates[i] for i in kept], dtype=float)
        lo = np.asarray([cis[i][0] for i in kept], dtype=float)
        hi = np.asarray([cis[i][1] for i in kept], dtype=float)
        tk = t[kept]
        row.update(
            mean_estimate=float(e.mean()),
            bias=float((e - tk).mean()),
            coverage95=float(((lo <= tk + 1e-12) & (tk - 1e-12 <= hi)).mean()),
            mean_width=float((hi - lo).mean()),
            deterministic=bool(np.all(np.abs(e - tk) < 1e-12)),
        )
    return row


# --- per-cell (one scenario), macro and rmb_overall ---------------------------------------------------------

CELL = "a scenario's accuracy: the probability that the RM wins an item drawn from the scenario's population of items"
MACRO = "a group's macro accuracy: the plain mean of its scenarios' accuracies (each over its population of items)"
OVERALL = "RMB overall: the mean of the four cells' (set x goal) macro accuracies"
POPULATION = (
    "Each draw draws the items anew from their scenario's population (each item its own probability of a win, "
    "Beta around the scenario's accuracy), then each item's outcome: one outcome per item cannot tell a fixed "
    "item's own probability, so the estimand is the population's."
)


def item_accuracies(rng: np.random.Generator, n: int, mean: float, spread: float = 0.3) -> np.ndarray:
    """``n`` items' own probabilities of a win, Beta around ``mean`` with concentration ``1 / spread``."""
    c = 1.0 / spread
    return rng.beta(mean * c, (1 - mean) * c, size=n)


def _predictions(set_name: str, goal: str, sizes: Sequence[int], accuracies: Sequence[float], rng) -> list[dict]:
    preds = []
    for s, (n, acc) in enumerate(zip(sizes, accuracies)):
        scenario = f"{goal}/S{s + 1}" if goal == "Harmlessness" else f"{goal}/Task{s}/Scenario{s}"
        won = rng.random(n) < item_accuracies(rng, n, acc)
        preds += [{"set": set_name, "scenario": scenario, "outcome": float(o)} for o in won]
    return preds


def cell_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """Per scenario, n = 1 to 200: mid-p (the toolkit's) beside Clopper-Pearson (replaced), at accuracies 0.75
    and 0.95 and with the scenario's accuracy itself drawn from 0.4-0.95 each draw (coverage averaged over
    accuracies: a binomial's coverage at one accuracy jumps with n, so no interval sits at 95% at each)."""
    from rmb_build.core.intervals import clopper_pearson

    rows = []
    for n in (1, 5, 20, 50, 200):
        for mean in (0.75, 0.95, None):
            rng = np.random.default_rng([seed, n, int((mean or 0) * 100)])
            truths, est, mid, exact = [], [], [], []
            for _ in range(draws):
                acc = mean if mean is not None else float(rng.uniform(0.4, 0.95))
                y = (rng.random(n) < item_accuracies(rng, n, acc)).astype(float)
                truths.append(acc)
                est.append(y.mean())
                mid.append(mean_interval(y))
                exact.append(clopper_pearson(int(y.sum()), n))
            # one fixed accuracy: a diagnostic row (bench/calibration_exact.py computes it exactly, beside the least
            # coverage any interval can have there); the band applies to the rows averaged over accuracies
            case = (
                f"n={n}, accuracy {mean} (fixed: diagnostic)"
                if mean is not None
                else f"n={n}, accuracy drawn from 0.4-0.95"
            )
            rows.append(summarise("per-scenario accuracy (mid-p)", CELL, case, truths, est, mid))
            rows.append(summarise("per-scenario accuracy (replaced: Clopper-Pearson)", CELL, case, truths, est, exact))
    return rows


def macro_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """The macro interval of one goal, as the toolkit computes it (metrics.macro_interval)."""
    rows = []
    layouts = {
        "12 scenarios of 1-4 items": (1, 5, 12),
        "12 scenarios of 20-200 items": (20, 201, 12),
        "12 scenarios of 10-20 items": (10, 21, 12),
        "37 scenarios of 1-200 items": (1, 201, 37),
    }
    uneven = {  # one large sure scenario beside small unsure ones: the goal's pooled variance is the large one's
        "uneven: 200 items at 0.99, 4 at 0.5": ((200, 4), (0.99, 0.5)),
        "uneven: 200 items at 0.95, 3 at 0.5, 3 at 0.6": ((200, 3, 3), (0.95, 0.5, 0.6)),
        "uneven: 100 items at 0.9, 10 at 0.5": ((100, 10), (0.9, 0.5)),
        "uneven: 200 items at 0.95, 3 at 0.5, 30 at 0.9": ((200, 3, 30), (0.95, 0.5, 0.9)),
        "uneven: 200 items at 0.95, 10 at 0.5, 30 at 0.9": ((200, 10, 30), (0.95, 0.5, 0.9)),
    }
    for name, spec in [*layouts.items(), *uneven.items()]:
        if name in uneven:
            rng = np.random.default_rng([seed, *spec[0]])
            sizes, accs = np.array(spec[0]), np.array(spec[1])
        else:
            lo, hi, k = spec
            rng = np.random.default_rng([seed, lo, hi, k])
            sizes, accs = rng.integers(lo, hi, k), rng.uniform(0.55, 0.9, k)
        est, cis, wald = [], [], []
        for d in range(draws):
            sm = set_draws(_predictions("pairwise", "Helpfulness", sizes, accs, rng), "pairwise", MC_DRAWS, seed + d)
            value, ci = sm.macro(sm.scenarios)
            est.append(value)
            cis.append(ci)
            wald.append(adjusted_wald([(1 / len(sm.scenarios), o) for o in sm.outcomes.values()]))
        truth = [float(np.mean(accs))] * draws
        rows.append(summarise("macro accuracy (toolkit: shrunk toward the goal's pool)", MACRO, name, truth, est, cis))
        rows.append(summarise("macro accuracy (candidate: adjusted Wald)", MACRO, name, truth, est, wald))
    return rows


def overall_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """``rmb_overall``'s interval over the four cells (8 helpfulness and 4 harmlessness scenarios a set)."""
    rows = []
    for name, lo, hi in (
        ("every scenario 1-4 items", 1, 5),
        ("every scenario 10-20 items", 10, 21),
        ("every scenario 20-200 items", 20, 201),
    ):
        rng = np.random.default_rng([seed, lo, hi])
        cells = [(s, g, k) for s in ("pairwise", "bon") for g, k in (("Helpfulness", 8), ("Harmlessness", 4))]
        layout = {(s, g): (rng.integers(lo, hi, k), rng.uniform(0.5, 0.9, k)) for s, g, k in cells}
        est, cis, wald = [], [], []
        for d in range(draws):
            preds = [p for (s, g), (sizes, accs) in layout.items() for p in _predictions(s, g, sizes, accs, rng)]
            samples = {s: set_draws(preds, s, MC_DRAWS, seed + d) for s in ("pairwise", "bon")}
            got = rmb_overall(samples)
            est.append(got["mean"])
            cis.append(got["ci95"]["mean"])
            parts = []
            for sm in samples.values():
                for members in sm.goals().values():
                    parts += [(1 / (len(layout) * len(members)), sm.outcomes[m]) for m in members]
            wald.append(adjusted_wald(parts))
        truth = [float(np.mean([np.mean(accs) for _, accs in layout.values()]))] * draws
        rows.append(summarise("rmb_overall (toolkit: shrunk toward the goal's pool)", OVERALL, name, truth, est, cis))
        rows.append(summarise("rmb_overall (candidate: adjusted Wald)", OVERALL, name, truth, est, wald))
    return rows


# --- ties counted half, and micro accuracy -----------------------------------------------------------------

TIES = (
    "a scenario's accuracy with ties counted half: P(win) + P(tie)/2 for an item drawn from the scenario's population"
)
MICRO = (
    "a group's micro accuracy: sum_s n_s theta_s / N, the expected outcome of the group's items drawn as the "
    "release's were (each scenario's n_s items from its own population, the sizes fixed)"
)
TIE_SHARES = (0.1, 0.3)


def tied_outcomes(rng: np.random.Generator, n: int, decided: float, ties: float) -> np.ndarray:
    """``n`` outcomes: a tie (0.5) with probability ``ties``, else a win with probability ``decided``; the
    scenario's accuracy is ``(1 - ties) decided + ties / 2``."""
    u = rng.random(n)
    return np.where(u < ties, 0.5, (rng.random(n) < decided).astype(float))


def ties_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """One scenario under ``--ties half``, n = 5 to 200, 10% and 30% ties, as evaluate computes its cell
    (``SetDraws.macro`` of the one scenario) beside the Monte Carlo Clopper-Pearson interval it replaced, on the
    same draws. The win share among decided items is drawn from 0.4-0.95 each draw (so the accuracy spreads over
    0.41-0.90 at 10% ties, 0.43-0.82 at 30%: a + t/2 with a = P(win) never above 1 - t), or fixed at a decided
    share giving an accuracy of 0.75 (diagnostic)."""
    from rmb_build.core.intervals import weighted_interval

    scenario = "Helpfulness/Chat/Discussion"
    rows = []
    for n in (5, 20, 50, 200):
        for t in TIE_SHARES:
            for fixed in (True, False):
                rng = np.random.default_rng([seed, n, int(t * 100), fixed])
                truths, est, new, old = [], [], [], []
                for d in range(draws):
                    decided = (0.75 - t / 2) / (1 - t) if fixed else float(rng.uniform(0.4, 0.95))
                    y = tied_outcomes(rng, n, decided, t)
                    preds = [{"set": "pairwise", "scenario": scenario, "outcome": float(o)} for o in y]
                    sm = set_draws(preds, "pairwise", MC_DRAWS, seed + d)
                    value, ci = sm.macro([scenario])
                    truths.append((1 - t) * decided + t / 2)
                    est.append(value)
                    new.append(ci)
                    old.append(weighted_interval([(1.0, sm.draws[scenario])]))
                case = f"n={n}, {t:.0%} ties, " + (
                    "accuracy 0.75 (fixed: diagnostic)" if fixed else "decided items won 0.4-0.95"
                )
                rows.append(
                    summarise(
                        "ties-half accuracy (toolkit: Wilson at its effective size)", TIES, case, truths, est, new
                    )
                )
                rows.append(
                    summarise(
                        "ties-half accuracy (replaced: Monte Carlo Clopper-Pearson)", TIES, case, truths, est, old
                    )
                )
    return rows


def micro_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """A goal's micro accuracy as evaluate computes it (``SetDraws.micro``: one interval over the pooled items),
    over scenarios of unequal sizes and accuracies, items drawn per scenario at the layout's sizes (the estimand's
    design), strict and with 30% ties counted half; ``one sample`` rows draw the scenario of each item instead
    (sizes multinomial at the layout's shares: the design a pooled proportion's interval assumes, diagnostic).
    Beside it, a candidate on the same draws: ``pooled_interval`` over the scenarios weighted by their sizes (the
    stratified design's variance, each scenario's shrunk toward the goal's as for a macro)."""
    layouts = {
        "8 scenarios of 5-200 items, accuracies 0.55-0.9": None,
        "uneven: 200 items at 0.95, 10 at 0.5, 30 at 0.9": ((200, 10, 30), (0.95, 0.5, 0.9)),
        "4 scenarios of 50 items at 0.5, 0.6, 0.9, 0.95": ((50, 50, 50, 50), (0.5, 0.6, 0.9, 0.95)),
    }
    rows = []
    for name, spec in layouts.items():
        for ties in (0.0, 0.3):
            for one_sample in (False, True):
                rng = np.random.default_rng([seed, len(name), int(ties * 10), one_sample])
                if spec is None:  # one layout for the four rows
                    layout = np.random.default_rng([seed, len(name)])
                    sizes, accs = layout.integers(5, 201, 8), layout.uniform(0.55, 0.9, 8)
                else:
                    sizes, accs = np.array(spec[0]), np.array(spec[1])
                names = [f"Helpfulness/Task{s}/Scenario{s}" for s in range(len(sizes))]
                truth = float(np.sum(sizes * ((1 - ties) * accs + ties / 2)) / sizes.sum())
                est, cis, strata = [], [], []
                for d in range(draws):
                    drawn = rng.multinomial(sizes.sum(), sizes / sizes.sum()) if one_sample else sizes
                    preds = [
                        {"set": "pairwise", "scenario": s, "outcome": float(o)}
                        for s, k, a in zip(names, drawn, accs)
                        for o in tied_outcomes(rng, int(k), float(a), ties)
                    ]
                    sm = set_draws(preds, "pairwise", MC_DRAWS, seed + d)
                    value, ci = sm.micro(sm.scenarios, "pairwise/Helpfulness/micro")
                    est.append(value)
                    cis.append(ci)
                    total = sum(len(o) for o in sm.outcomes.values())
                    strata.append(pooled_interval([(len(o) / total, o, "g") for o in sm.outcomes.values()]))
                case = (
                    name + (f", {ties:.0%} ties" if ties else "") + (", one sample (diagnostic)" if one_sample else "")
                )
                truths = [truth] * draws
                toolkit, candidate = "toolkit: one interval over the pooled items", "candidate: weights n_s/N, pooled"
                rows.append(summarise(f"micro accuracy ({toolkit})", MICRO, case, truths, est, cis))
                rows.append(summarise(f"micro accuracy ({candidate})", MICRO, case, truths, est, strata))
    return rows


# --- length-neutral accuracy -----------------------------------------------------------------------------

LENGTH = (
    "the expected accuracy on these pairs reweighted so that, at every size of length gap, the chosen answer is "
    "the longer as often as the shorter (50 for any scorer going by length alone)"
)


def length_pairs(rng: np.random.Generator, n: int, share: float, equal: int = 0) -> np.ndarray:
    """``n`` length differences (chosen minus rejected): a ``share`` of the unequal ones positive, gaps
    log-normal and larger where the chosen answer is the longer (as a length-preferring judge makes them)."""
    sign = np.where(rng.random(n - equal) < share, 1.0, -1.0)
    gap = np.ceil(np.exp(rng.normal(np.where(sign > 0, np.log(250), np.log(120)), 1.0)))
    return np.concatenate([sign * gap, np.zeros(equal)])


def _length_scorer(kind: str, d: np.ndarray, rng) -> np.ndarray:
    """Each pair's probability of a win under one kind of scorer."""
    x = np.sign(d) * np.log1p(np.abs(d))
    if kind == "longer wins":
        return np.where(d > 0, 1.0, np.where(d < 0, 0.0, 0.5))
    if kind == "shorter wins":
        return np.where(d < 0, 1.0, np.where(d > 0, 0.0, 0.5))
    if kind == "noisy length":  # length alone, through noise: 73% right at a 100-character gap
        return 1 / (1 + np.exp(-0.2 * x))
    if kind.startswith("content "):  # length-independent: every pair won with the same probability
        return np.full(len(d), float(kind.split()[1]))
    if kind == "content 0.7 + length":  # per-item accuracies spread, plus a pull toward the longer answer
        base = rng.beta(7, 3, size=len(d))
        return 1 / (1 + np.exp(-(np.log(base / (1 - base)) + 0.1 * x)))
    raise ValueError(kind)


def length_check(
    kind: str, share: float, n: int, draws: int, seed: int, equal: int = 0, ties: str = "half", estimator=None
):
    """One length-neutral row: each draw makes new pairs and new outcomes; the truth is the estimand computed
    from the pairs' known win probabilities (the estimator is linear in the outcomes). ``estimator`` replaces
    ``length_neutral`` for the estimate (not the truth): how another estimator fares on the same draws."""
    estimate = estimator or length_neutral
    rng = np.random.default_rng([seed, n, int(share * 1000), equal, len(kind)])
    truths, est, cis, plain = [], [], [], []
    for _ in range(draws):
        x = length_pairs(rng, n, share, equal)
        p = _length_scorer(kind, x, rng)
        if ties == "strict":
            p = np.where(p == 0.5, 0.0, p)  # a length-only scorer ties at equal length; strict counts it wrong
        y = np.where(p == 0.5, 0.5, (rng.random(n) < p).astype(float))
        got = {"length_neutral": None, "length_neutral_ci95": None, **estimate(x, y)}
        truth = length_neutral(x, p).get("length_neutral")
        truths.append(truth if truth is not None else float("nan"))
        est.append(got["length_neutral"])
        cis.append(got["length_neutral_ci95"])
        plain.append(float(y.mean()))
    case = f"{kind}, {n} pairs, chosen longer {share:.0%}" + (f", {equal} equal-length ({ties})" if equal else "")
    name = "length-neutral accuracy (length-balanced)" if estimator is None else estimator.__doc__.splitlines()[0]
    row = summarise(name, LENGTH, case, truths, est, cis)
    row["mean_plain"] = float(np.mean(plain))
    return row


def length_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    rows = [length_check("longer wins", s, 400, draws, seed) for s in (0.5, 0.6, 0.75, 0.9, 1.0)]
    rows += [length_check("shorter wins", 0.75, 400, draws, seed)]
    rows += [length_check("longer wins", 0.75, 819, draws, seed, equal=2, ties=t) for t in ("strict", "half")]
    rows += [length_check("noisy length", s, 400, draws, seed) for s in (0.5, 0.75, 0.9)]
    rows += [length_check("content 0.76", s, 400, draws, seed) for s in (0.5, 0.75, 0.9)]
    rows += [length_check("content 0.76", 0.75, 40, draws, seed)]
    rows += [length_check("content 0.7 + length", s, 400, draws, seed) for s in (0.5, 0.75)]
    return rows


# --- style figures ---------------------------------------------------------------------------------------

STYLE = "a style figure: the mean over scenarios of the expected per-record figure over the records' population"
LEVEL_CELLS = {"hard": [(0, 1), (0, 2), (1, 2)], "normal": [(0, 0), (1, 1), (2, 2)], "easy": [(1, 0), (2, 0), (2, 1)]}


def style_records(rng, k: int, content: float, style: float) -> np.ndarray:
    """``k`` records' 3x3 matrices of win probabilities: a record's own difficulty (shared by its cells, normal
    with SD 1 logit around ``content``) plus ``style`` logits per step of style (concise < detailed < markdown)
    of chosen over rejected."""
    base = np.log(content / (1 - content)) + rng.normal(0, 1.0, size=(k, 1, 1))
    i, j = np.meshgrid(range(3), range(3), indexing="ij")
    return 1 / (1 + np.exp(-(base + style * (i - j))))


def _style_values(m: np.ndarray) -> dict[str, np.ndarray]:
    """Per record (first axis) the four figures of a 3x3 matrix of outcomes or probabilities."""
    out = {f: np.mean([m[:, a, b] for a, b in cells], axis=0) for f, cells in LEVEL_CELLS.items()}
    return {**out, "average": m.reshape(len(m), 9).mean(axis=1)}


def bias_probabilities(rng, k: int, style: float) -> np.ndarray:
    """``k`` records' probabilities that a variant one style step up (detailed over concise, markdown over detailed)
    scores above the same answer's variant below it: ``style`` logits plus the record's own SD-1 logit."""
    return 1 / (1 + np.exp(-(style + rng.normal(0, 1.0, size=k))))


def bias_outcomes(rng, probabilities: np.ndarray) -> np.ndarray:
    """A record's ``prefers_*`` value: the share of its two answers (chosen, rejected) whose upper variant won."""
    return (rng.random((len(probabilities), 2)) < probabilities[:, None]).mean(axis=1)


def style_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    draws = min(draws, STYLE_DRAWS)
    for name, content, style, scenarios, per in (
        ("content 0.75, style-blind, 3 scenarios x 30 records", 0.75, 0.0, 3, 30),
        ("content 0.75, reads style (1 logit a step), 3 x 30", 0.75, 1.0, 3, 30),
        ("style only (3 logits a step), 3 x 30", 0.5, 3.0, 3, 30),
        ("content 0.75, style-blind, 10 scenarios x 3 records", 0.75, 0.0, 10, 3),
    ):
        rng = np.random.default_rng([seed, scenarios, per, int(style * 10)])
        truth = {
            f: float(v.mean()) for f, v in _style_values(style_records(rng, TRUTH_RECORDS, content, style)).items()
        }
        for bias in BIAS:
            truth[bias] = float(bias_probabilities(rng, TRUTH_RECORDS, style).mean())
        scen = [f"Helpfulness/Task{k % scenarios}/Scenario{k % scenarios}" for k in range(scenarios * per)]
        found: dict[str, tuple[list, list]] = {f: ([], []) for f in truth}
        for d in range(draws):
            probs = style_records(rng, len(scen), content, style)
            values = _style_values((rng.random(probs.shape) < probs).astype(float))
            for bias in BIAS:
                values[bias] = bias_outcomes(rng, bias_probabilities(rng, len(scen), style))
            rows_d = [{"scenario": s, **{f: float(v[k]) for f, v in values.items()}} for k, s in enumerate(scen)]
            got = style_figures(rows_d, MC_DRAWS, seed + d)["overall"]
            for f, (e, c) in found.items():
                e.append(got[f])
                c.append(got["ci95"][f])
        rows += [
            summarise(f"style {f} (toolkit: shrunk toward the goal's pool)", STYLE, name, [truth[f]] * draws, *found[f])
            for f in found
        ]

    return rows


# --- the suite -------------------------------------------------------------------------------------------

CHECKS: tuple[Check, ...] = (
    cell_checks,
    ties_checks,
    macro_checks,
    micro_checks,
    overall_checks,
    length_checks,
    style_checks,
)


def external_checks() -> list[Check]:
    """``bench/calibration_uncertainty.py``'s ``checks``, where that module exists."""
    path = Path(__file__).with_name("calibration_uncertainty.py")
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location("calibration_uncertainty", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return [module.checks]


def run(draws: int, seed: int, checks: Iterable[Check] | None = None) -> list[dict[str, Any]]:
    rows = []
    for check in checks if checks is not None else (*CHECKS, *external_checks()):
        rows += check(draws, seed)
    return rows


def _f(v: Any, pct: bool = True) -> str:
    if v is None:
        return "–"
    return f"{100 * v:.1f}" if pct else f"{v:.3f}"


def table(rows: Sequence[dict[str, Any]], markdown: bool) -> str:
    head = ["estimator", "case", "draws", "truth", "mean est.", "bias", "coverage 95", "mean width", "refused", "plain"]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * 2 + " ---: |" * (len(head) - 2)]
    for r in rows:
        cov = _f(r["coverage95"]) + (" (deterministic)" if r.get("deterministic") else "")
        cells = [
            r["estimator"],
            r["case"],
            str(r["draws"]),
            _f(r["truth"]),
            _f(r["mean_estimate"]),
            _f(r["bias"]),
            cov,
            _f(r["mean_width"]),
            _f(r.get("refused", 0.0)),
            _f(r.get("mean_plain")),
        ]
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(args.draws, args.seed)
    print(table(rows, args.markdown))
    print(
        f"\n{len(rows)} rows, {args.draws} draws each, seed {args.seed}, {time.perf_counter() - t0:.0f} s",
        file=sys.stderr,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
