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

from rmb_build.core.intervals import mean_interval
from rmb_build.evaluate.length_control import length_neutral
from rmb_build.evaluate.metrics import rmb_overall, set_draws
from rmb_build.evaluate.style import _figures as style_figures

ROW_KEYS = ("estimator", "estimand", "case", "draws", "truth", "mean_estimate", "bias", "coverage95", "mean_width")
MC_DRAWS = 1000  # the intervals' own Monte Carlo draws inside each calibration draw (evaluate's default is 4000)
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

CELL = "a scenario's accuracy: the expected outcome of its items, each item with its own probability of a win"
MACRO = "a group's macro accuracy: the plain mean of its scenarios' expected accuracies"
OVERALL = "RMB overall: the mean of the four cells' (set x goal) macro expected accuracies"


def item_accuracies(rng: np.random.Generator, n: int, mean: float, spread: float) -> np.ndarray:
    """``n`` known per-item accuracies around ``mean``: Beta with concentration ``1 / spread`` (0: all equal)."""
    if spread == 0:
        return np.full(n, mean)
    c = 1.0 / spread
    return rng.beta(mean * c, (1 - mean) * c, size=n)


def _predictions(set_name: str, goal: str, sizes: Sequence[int], probs, rng) -> tuple[list[dict], dict[str, float]]:
    preds, truth = [], {}
    for s, (n, p) in enumerate(zip(sizes, probs)):
        scenario = f"{goal}/S{s + 1}" if goal == "Harmlessness" else f"{goal}/Task{s}/Scenario{s}"
        truth[scenario] = float(p.mean())
        preds += [{"set": set_name, "scenario": scenario, "outcome": float(o)} for o in rng.random(n) < p]
    return preds, truth


def cell_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """Clopper-Pearson per scenario, n = 1 to 200, equal and spread per-item accuracies."""
    rows = []
    for n in (1, 5, 20, 200):
        for mean, spread in ((0.75, 0.0), (0.75, 0.3), (0.95, 0.0)):
            rng = np.random.default_rng([seed, n, int(mean * 100), int(spread * 10)])
            p = item_accuracies(rng, n, mean, spread)  # the items are fixed; their outcomes are drawn
            truths, est, cis = [], [], []
            for _ in range(draws):
                y = (rng.random(n) < p).astype(float)
                truths.append(p.mean())
                est.append(y.mean())
                cis.append(mean_interval(y))
            case = f"n={n}, accuracy {mean}" + (f", per-item spread {spread}" if spread else ", items alike")
            rows.append(summarise("per-scenario accuracy (Clopper-Pearson)", CELL, case, truths, est, cis))
    return rows


def macro_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """The macro interval of one goal (Monte Carlo Clopper-Pearson through the mean of scenarios)."""
    rows = []
    layouts = {
        "12 scenarios of 1-4 items": lambda r: r.integers(1, 5, 12),
        "12 scenarios of 20-200 items": lambda r: r.integers(20, 201, 12),
        "37 scenarios of 1-200 items": lambda r: r.integers(1, 201, 37),
    }
    for name, sizes_of in layouts.items():
        rng = np.random.default_rng([seed, len(name)])
        sizes = sizes_of(rng)
        probs = [item_accuracies(rng, n, m, 0.3) for n, m in zip(sizes, rng.uniform(0.55, 0.9, len(sizes)))]
        truths, est, cis = [], [], []
        for d in range(draws):
            preds, truth = _predictions("pairwise", "Helpfulness", sizes, probs, rng)
            sm = set_draws(preds, "pairwise", MC_DRAWS, seed + d)
            value, ci = sm.macro(sm.scenarios)
            truths.append(float(np.mean(list(truth.values()))))
            est.append(value)
            cis.append(ci)
        rows.append(summarise("macro accuracy (Monte Carlo Clopper-Pearson)", MACRO, name, truths, est, cis))
    return rows


def overall_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    """``rmb_overall``'s interval over the four cells."""
    rows = []
    for name, lo, hi in (("every scenario 1-4 items", 1, 5), ("every scenario 20-200 items", 20, 201)):
        rng = np.random.default_rng([seed, lo, hi])
        layout = {
            (s, g): rng.integers(lo, hi, k) for s in ("pairwise", "bon") for g, k in (("Helpfulness", 8), ("Harmlessness", 4))
        }
        probs = {key: [item_accuracies(rng, n, m, 0.3) for n, m in zip(v, rng.uniform(0.5, 0.9, len(v)))] for key, v in layout.items()}
        truths, est, cis = [], [], []
        for d in range(draws):
            preds, cell_truth = [], {}
            for (s, g), sizes in layout.items():
                p, t = _predictions(s, g, sizes, probs[(s, g)], rng)
                preds += p
                cell_truth[(s, g)] = float(np.mean(list(t.values())))
            got = rmb_overall({s: set_draws(preds, s, MC_DRAWS, seed + d) for s in ("pairwise", "bon")})
            truths.append(float(np.mean(list(cell_truth.values()))))
            est.append(got["mean"])
            cis.append(got["ci95"]["mean"])
        rows.append(summarise("rmb_overall (Monte Carlo Clopper-Pearson)", OVERALL, name, truths, est, cis))
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


def length_check(kind: str, share: float, n: int, draws: int, seed: int, equal: int = 0, ties: str = "half"):
    """One length-neutral row: each draw makes new pairs and new outcomes; the truth is the estimand computed
    from the pairs' known win probabilities (the estimator is linear in the outcomes)."""
    rng = np.random.default_rng([seed, n, int(share * 1000), equal, len(kind)])
    truths, est, cis, plain = [], [], [], []
    for d in range(draws):
        x = length_pairs(rng, n, share, equal)
        p = _length_scorer(kind, x, rng)
        if ties == "strict":
            p = np.where(p == 0.5, 0.0, p)  # a length-only scorer ties at equal length; strict counts it wrong
        y = np.where(p == 0.5, 0.5, (rng.random(n) < p).astype(float))
        got = {"length_neutral": None, "length_neutral_ci95": None, **length_neutral(x, y)}
        truth = length_neutral(x, p).get("length_neutral")
        truths.append(truth if truth is not None else float("nan"))
        est.append(got["length_neutral"])
        cis.append(got["length_neutral_ci95"])
        plain.append(float(y.mean()))
    case = f"{kind}, {n} pairs, chosen longer {share:.0%}" + (f", {equal} equal-length ({ties})" if equal else "")
    row = summarise("length-neutral accuracy (length-balanced)", LENGTH, case, truths, est, cis)
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

STYLE = "a style figure: the mean over scenarios of the expected per-record figure (records the unit)"
LEVEL_CELLS = {"hard": [(0, 1), (0, 2), (1, 2)], "normal": [(0, 0), (1, 1), (2, 2)], "easy": [(1, 0), (2, 0), (2, 1)]}


def style_records(rng, scenarios: int, per: int, content: float, style: float) -> list[np.ndarray]:
    """Per record a 3x3 matrix of win probabilities: a record's own difficulty (shared by its cells) plus a
    pull of ``style`` logits per step of style (concise < detailed < markdown) of chosen over rejected."""
    recs = []
    for _ in range(scenarios * per):
        base = np.log(content / (1 - content)) + rng.normal(0, 1.0)
        i, j = np.meshgrid(range(3), range(3), indexing="ij")
        recs.append(1 / (1 + np.exp(-(base + style * (i - j)))))
    return recs


def style_checks(draws: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for name, content, style, scenarios, per in (
        ("content 0.75, style-blind, 3 scenarios x 30 records", 0.75, 0.0, 3, 30),
        ("content 0.75, reads style (1 logit a step), 3 x 30", 0.75, 1.0, 3, 30),
        ("style only (3 logits a step), 3 x 30", 0.5, 3.0, 3, 30),
        ("content 0.75, style-blind, 10 scenarios x 3 records", 0.75, 0.0, 10, 3),
    ):
        rng = np.random.default_rng([seed, scenarios, per, int(style * 10)])
        recs = style_records(rng, scenarios, per, content, style)
        scen = [f"Helpfulness/Task{k % scenarios}/Scenario{k % scenarios}" for k in range(len(recs))]
        found: dict[str, tuple[list, list, list]] = {f: ([], [], []) for f in ("hard", "normal", "easy", "average")}
        for d in range(draws):
            rows_d, truth_rows = [], []
            for p, s in zip(recs, scen):
                m = (rng.random((3, 3)) < p).astype(float)
                rows_d.append({"scenario": s, **{f: float(np.mean([m[c] for c in cells])) for f, cells in LEVEL_CELLS.items()}, "average": float(m.mean()), "prefers_detailed": 0.5, "prefers_markdown": 0.5})
                truth_rows.append({"scenario": s, **{f: float(np.mean([p[c] for c in cells])) for f, cells in LEVEL_CELLS.items()}, "average": float(p.mean())})
            got = style_figures(rows_d, MC_DRAWS, seed + d)["overall"]
            for f, (t, e, c) in found.items():
                per_s: dict[str, list[float]] = {}
                for r in truth_rows:
                    per_s.setdefault(r["scenario"], []).append(r[f])
                t.append(float(np.mean([np.mean(v) for v in per_s.values()])))
                e.append(got[f])
                c.append(got["ci95"][f])
        rows += [summarise(f"style {f} (Monte Carlo Clopper-Pearson)", STYLE, name, *found[f]) for f in found]
    return rows


# --- the suite -------------------------------------------------------------------------------------------

CHECKS: tuple[Check, ...] = (cell_checks, macro_checks, overall_checks, length_checks, style_checks)


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
    head = ["estimator", "case", "draws", "truth", "mean est.", "bias", "coverage 95", "mean width", "refused"]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * 2 + " ---: |" * (len(head) - 2)]
    for r in rows:
        cov = _f(r["coverage95"]) + (" (deterministic)" if r.get("deterministic") else "")
        cells = [r["estimator"], r["case"], str(r["draws"]), _f(r["truth"]), _f(r["mean_estimate"]), _f(r["bias"]), cov, _f(r["mean_width"]), _f(r.get("refused", 0.0))]
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
    print(f"\n{len(rows)} rows, {args.draws} draws each, seed {args.seed}, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
