"""Length-controlled pairwise accuracy, for any release (results.json ``length_control``).

The length difference of a pair is ``d = len(chosen) - len(rejected)`` in characters (Unicode code points of the
answer strings; not the RM's tokens, which differ between RMs and would make two RMs' figures incomparable).

- ``bins``: accuracy in fixed bins of that difference, each with its mid-p interval.
- ``length_neutral``: **length-balanced accuracy**. Estimand: the RM's expected accuracy on these pairs
  reweighted so that, at every size of length gap, the chosen answer is the longer exactly as often as the
  shorter. The pairs with ``d != 0`` are cut into strata of ``|d|`` (at quantiles of the gaps of the rarer
  sign, so that every stratum holds both signs); in each stratum the accuracy over chosen-longer and over
  chosen-shorter pairs is averaged with equal weight, and the strata are weighted by their pairs. Equal-length
  pairs (``d = 0``) are balanced already: they are one stratum of their own, weighted by their count, and a tie
  there counts as ``--ties`` says (so 2 equal-length pairs of 819 move the figure by at most 0.25 points).
  A scorer whose choice follows length alone (the longer answer wins, or the shorter) reads exactly 50 over
  the pairs with ``d != 0``, whatever the chosen-longer share; one that follows length through noise reads
  near 50 (the strata balance the gaps coarsely); a length-independent scorer reads its plain accuracy.
  95% interval: ``core/intervals.adjusted_wald``, the estimate plus or minus 1.96 standard errors, each
  (stratum, side) group's variance from its outcomes with one win and one loss added, as Agresti and Caffo do
  for a linear combination of proportions (never 0 for a group all won or all lost); no fit, no resampling.
  The strata keep at least 10 pairs of the rarer side each (at most 8 strata): with 5, or without the added
  win and loss, the interval covered 91.5-93% where the chosen answer is the longer in 90% of 400 pairs.
  Refused as a point (null, with ``length_neutral_reason``) where no pair has the chosen answer shorter, or
  none longer: there the data cannot tell a length-only scorer from a perfect one, so any figure would be a
  guess. Its interval is then the identification bound (``length_neutral_bound``): the seen side's interval
  combined with any accuracy, 0 to 1, on the side no pair has (a length-only scorer's bound holds 50).

Why not a regression read at ``d = 0`` (length-controlled AlpacaEval's GLM, a Firth-penalised logistic fit as
this module had): a length-only scorer separates outcome and length perfectly, the fit's slope runs to
infinity and the answer is whatever the penalty makes it (62 at a 75% chosen-longer share, 73 at 90%), and
each bootstrap draw is a fit (about 115 s per evaluate of the official release). The calibration suite
(``bench/calibration.py``, ``docs/calibration.md``) shows the balanced estimator's bias and coverage.
Per goal and over all pairwise items; an outcome of 0.5 (a tie under ``--ties half``) enters as a fraction.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from rmb_build.core.intervals import adjusted_wald, mean_interval
from rmb_build.core.items import Item, PairwiseItem
from rmb_build.core.taxonomy import PAIRWISE_SET, parse_scenario_id

UNIT = "characters (Unicode code points) of the answer: chosen minus rejected"
ESTIMATOR = (
    "length-balanced accuracy: within strata of the absolute length difference |d|, the mean of the accuracy "
    "over chosen-longer and over chosen-shorter pairs, strata weighted by their pairs; equal-length pairs are a "
    "stratum of their own, a tie counted as --ties says. A scorer going by length alone reads 50 over the "
    "unequal pairs; refused where every unequal pair's chosen answer is longer (or every one shorter). 95% "
    "interval: normal, each (stratum, side) group's variance with one win and one loss added (Agresti-Caffo)"
)
EDGES = (-1000, -300, -100, 0, 1, 100, 300, 1000)  # bins: below -1000, [-1000, -300), ..., [1, 100), ..., 1000 up
MIN_PAIRS = 10
MAX_STRATA = 8  # of |d|; more strata balance finer, fewer keep each (stratum, sign) group larger
PER_STRATUM = 10  # pairs of the rarer sign per stratum at least: fewer and the normal interval undercovers


def _label(lo: float, hi: float) -> str:
    if lo == -np.inf:
        return f"< {hi:g}"
    if hi == np.inf:
        return f">= {lo:g}"
    return "0" if (lo, hi) == (0, 1) else f"[{lo:g}, {hi:g})"


def _bins(x: np.ndarray, y: np.ndarray, draws: int, seed: int, stratum: str) -> list[dict[str, Any]]:
    edges = (-np.inf, *EDGES, np.inf)
    out = []
    for lo, hi in zip(edges, edges[1:]):
        sel = (x >= lo) & (x < hi)
        row: dict[str, Any] = {"label": _label(lo, hi), "range": [_num(lo), _num(hi)], "n": int(sel.sum())}
        if sel.any():
            row["accuracy"] = float(y[sel].mean())
            row["ci95"] = mean_interval(y[sel], draws, seed, f"{stratum}/{row['label']}")
        else:
            row["accuracy"] = row["ci95"] = None
        out.append(row)
    return out


def _num(v: float) -> float | None:
    return None if np.isinf(v) else float(v)


def strata(gap: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """Each unequal pair's stratum of ``|d|`` (0, 1, ...): edges at quantiles of the rarer sign's gaps, merged
    until every stratum holds pairs of both signs (``sign`` is +1 or -1, never 0)."""
    rare = gap[sign == (1 if (sign > 0).sum() <= (sign < 0).sum() else -1)]
    k = max(1, min(MAX_STRATA, len(rare) // PER_STRATUM))
    edges = list(np.unique(np.quantile(rare, np.arange(1, k) / k))) if k > 1 else []
    while True:
        label = np.searchsorted(np.asarray(edges, dtype=float), gap, side="right")
        lacking = [
            b
            for b in range(len(edges) + 1)
            if not ((label == b) & (sign > 0)).any() or not ((label == b) & (sign < 0)).any()
        ]
        if not lacking:
            return label
        b = lacking[0]
        del edges[min(b, len(edges) - 1)]  # merge the stratum with its neighbour


def length_neutral(d: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """The length-balanced accuracy of outcomes ``y`` at length differences ``d``, with its 95% interval (see the
    module docstring), or why there is none."""
    n, longer, shorter = len(y), int((d > 0).sum()), int((d < 0).sum())
    if n < MIN_PAIRS:
        return {"length_neutral_reason": f"{n} pairs, fewer than {MIN_PAIRS}"}
    one_sided = bool(longer) != bool(shorter)
    unequal = d != 0
    groups: list[tuple[float, np.ndarray]] = []  # (weight, outcomes) of each group
    if one_sided:
        # the missing side's accuracy is unknown, anywhere in [0, 1]: the stratum of the seen side alone, and
        # the bound of the figure over every value the missing side could take
        groups.append((unequal.sum() / n / 2, y[unequal]))
    elif unequal.any():
        label = strata(np.abs(d[unequal]), np.sign(d[unequal]))
        yu, su = y[unequal], np.sign(d[unequal])
        for b in range(int(label.max()) + 1):
            in_b = label == b
            groups += [(in_b.sum() / n / 2, yu[in_b & (su == side)]) for side in (1, -1)]
    if (~unequal).any():
        groups.append(((~unequal).sum() / n, y[~unequal]))
    if one_sided:
        always, never = ("longer", "shorter") if longer else ("shorter", "longer")
        lo, hi = adjusted_wald(groups)
        return {
            "length_neutral_reason": f"every pair of unequal lengths has the chosen answer {always}, none {never}: "
            "the data cannot tell a scorer going by length from one going by content; the interval is the bound "
            f"over any accuracy on chosen-{never} pairs",
            "length_neutral_ci95": [lo, float(min(1.0, hi + unequal.sum() / n / 2))],
            "length_neutral_bound": True,
            "equal_length_pairs": int((~unequal).sum()),
        }
    value = float(sum(w * o.mean() for w, o in groups))
    ci = adjusted_wald(groups)
    return {
        "length_neutral": value,
        "length_neutral_ci95": ci,
        "length_strata": (len(groups) - int((~unequal).any())) // 2,
        "equal_length_pairs": int((~unequal).sum()),
    }


def group_figures(x: np.ndarray, y: np.ndarray, draws: int, seed: int, stratum: str) -> dict[str, Any]:
    """One group's plain accuracy, its length-neutral accuracy with interval, and its bins."""
    out: dict[str, Any] = {
        "n": len(y),
        "accuracy": float(y.mean()),
        "ci95": mean_interval(y, draws, seed, f"{stratum}/plain"),
        "chosen_longer_share": float((x > 0).mean()),
        "length_neutral": None,
        "length_neutral_ci95": None,
        "bins": _bins(x, y, draws, seed, stratum),
    }
    return {**out, **length_neutral(x, y)}


def length_control(
    items: Sequence[Item], predictions: Sequence[Mapping[str, Any]], draws: int, seed: int
) -> dict[str, Any]:
    """results.json's ``length_control`` over the pairwise predictions (matched to ``items`` by uid)."""
    by_uid = {it.uid: it for it in items if isinstance(it, PairwiseItem)}
    rows = [(p, by_uid[p["uid"]]) for p in predictions if p["set"] == PAIRWISE_SET and p["uid"] in by_uid]
    out: dict[str, Any] = {"unit": UNIT, "estimator": ESTIMATOR, "goals": {}, "overall": None}
    if not rows:
        return out
    x = np.array([len(it.chosen.answer) - len(it.rejected.answer) for _, it in rows], dtype=float)
    y = np.array([float(p["outcome"]) for p, _ in rows])
    goals = np.array([parse_scenario_id(p["scenario"]).goal for p, _ in rows])
    for g in dict.fromkeys(goals):
        sel = goals == g
        out["goals"][g] = group_figures(x[sel], y[sel], draws, seed, f"length/{g}")
    out["overall"] = group_figures(x, y, draws, seed, "length/overall")
    return out


__all__ = ["ESTIMATOR", "UNIT", "group_figures", "length_control", "length_neutral", "strata"]
