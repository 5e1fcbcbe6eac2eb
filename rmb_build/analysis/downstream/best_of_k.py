"""Best-of-k arithmetic, exact, with ties: the expected grade of a reward model's pick.

For one prompt, n samples each have a grade g (the grader's) and an RM score s. The RM picks, from k
samples drawn without replacement, the one it scores highest; ties in its score are broken uniformly.
Group the samples by equal score in increasing order; with a_j the number of samples scoring at or
below group j and ḡ_j the group's mean grade, the pick lies in group j exactly when the k drawn all
score at or below it and not all below it, so

    E_k = Σ_j [C(a_j, k) − C(a_{j−1}, k)] / C(n, k) · ḡ_j

(within the group every member is equally likely to be picked: by symmetry, ḡ_j). No random draw is made.
E_1 is the mean grade (a random pick, the same for every RM); the oracle is the same formula with the
grades as scores (E_n: the best grade). Across RMs, each benchmark figure is correlated with the
downstream score (Pearson, Spearman, Kendall's tau-b): with fewer than ``MIN_RMS_FOR_INTERVAL`` RMs an
exact permutation p-value and no interval, from there a bootstrap interval resampling prompts and RMs.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

MIN_RMS = 3  # fewer RMs: no correlation is reported
MIN_RMS_FOR_INTERVAL = 8  # fewer: exact permutation p-values, no interval (a bootstrap over so few says little)
DEFAULT_RESAMPLES = 2000
ALPHA = 0.05
METHODS = ("pearson", "spearman", "kendall")


def ks_for(n: int) -> list[int]:
    """k = 1, 2, 4, ... up to n, and n itself."""
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def _groups(scores: Sequence[float], grades: Sequence[Any]) -> list[tuple[int, list[Any]]]:
    """(a_j, grades of group j) for the groups of equal score in increasing order."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    out: list[tuple[int, list[Any]]] = []
    last = None
    for count, i in enumerate(order, start=1):
        if out and scores[i] == last:
            out[-1] = (count, out[-1][1] + [grades[i]])
        else:
            out.append((count, [grades[i]]))
        last = scores[i]
    return out


def expected_pick(scores: Sequence[float], grades: Sequence[Any], k: int, exact: bool = False) -> Fraction | float:
    """E_k: the expected grade of the pick of the highest-scoring of k samples drawn without replacement
    from the n (ties broken uniformly). ``exact``: a Fraction (grades must then be ints or Fractions)."""
    n = len(scores)
    if n == 0 or len(grades) != n:
        raise ValueError("expected_pick needs as many grades as scores, at least one")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} is outside 1..{n}")
    total = math.comb(n, k)
    acc: Fraction | float = Fraction(0) if exact else 0.0
    prev = 0
    for a, members in _groups(scores, grades):
        weight = math.comb(a, k) - math.comb(prev, k)
        if weight:
            mean = Fraction(sum(members), len(members)) if exact else sum(members) / len(members)
            acc += (Fraction(weight, total) if exact else weight / total) * mean
        prev = a
    return acc


def curve(scores: Sequence[float], grades: Sequence[float], ks: Sequence[int]) -> list[float]:
    return [float(expected_pick(scores, grades, k)) for k in ks]


def oracle_agreement(scores: Sequence[float], grades: Sequence[float]) -> float:
    """The chance that the RM's pick of all n samples has the best grade (its top group's share of it)."""
    top = max(scores)
    best = max(grades)
    members = [g for s, g in zip(scores, grades) if s == top]
    return sum(1 for g in members if g == best) / len(members)


def percentile_interval(values: np.ndarray, alpha: float = ALPHA) -> list[float] | None:
    """The bootstrap percentile interval; None when every draw gave the same value (a zero-width
    interval says nothing) or none was defined."""
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    lo, hi = float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))
    return [lo, hi] if hi > lo else None


def bias_corrected_interval(values: np.ndarray, observed: float, alpha: float = ALPHA) -> list[float] | None:
    """The bias-corrected percentile interval (Efron's BC): the percentiles are shifted by how far the draws
    sit below or above the observed value. Resampling RMs with replacement (ties) and prompts (extra noise in
    each RM's mean) pulls a correlation's draws towards 0, so a plain percentile interval can miss the
    observed value altogether; BC corrects that median bias. None as ``percentile_interval``, and when every
    draw falls on one side of the observed value (then no percentile of them is an interval around it)."""
    from scipy.stats import norm

    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    below = (np.sum(values < observed) + 0.5 * np.sum(values == observed)) / len(values)
    if below in (0.0, 1.0):  # every draw on one side: the bootstrap cannot place the observed value
        return None
    z0, z = norm.ppf(below), norm.ppf(1 - alpha / 2)
    levels = norm.cdf(2 * z0 - z), norm.cdf(2 * z0 + z)
    if levels[0] > 1 - 1 / len(values) or levels[1] < 1 / len(values):  # both ends past the last draw
        return None
    lo, hi = (float(np.quantile(values, q)) for q in levels)
    return [lo, hi] if hi > lo else None


def bootstrap_mean(
    per_prompt: np.ndarray, resamples: int, seed: int, scale: tuple[float, float] | None = None
) -> list[float] | None:
    """95% percentile interval of the mean over prompts, prompts resampled with replacement.

    Where every draw gives one value (every prompt the same, e.g. an RM that always picks the best grade)
    the bootstrap says nothing; with the grades' ``scale`` known (1-10, 0-1) the interval is then the
    toolkit's interval of a mean of outcomes in [0, 1] (``core.intervals.mean_interval``: mid-p, or
    Wilson's interval at the values' own effective size) on the rescaled values, which is never of zero
    width; else None."""
    per_prompt = np.asarray(per_prompt, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_prompt), size=(resamples, len(per_prompt)))
    ci = percentile_interval(per_prompt[idx].mean(axis=1))
    if ci is None and scale is not None and scale[1] > scale[0]:
        from rmb_build.core.intervals import mean_interval

        lo, hi = scale
        unit = np.clip((per_prompt - lo) / (hi - lo), 0.0, 1.0)
        ci = [lo + (hi - lo) * v for v in mean_interval(unit, seed=seed, stratum="downstream")]
    return ci


# ---- correlations across RMs -----------------------------------------------------------------------


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denom) if denom > 0 else math.nan


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    return _pearson(_ranks(x), _ranks(y))


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b (ties in either variable accounted for)."""
    from scipy.stats import kendalltau

    if len(set(x.tolist())) < 2 or len(set(y.tolist())) < 2:
        return math.nan
    return float(kendalltau(x, y).statistic)


STATISTICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "pearson": _pearson,
    "spearman": _spearman,
    "kendall": _kendall,
}


def permutation_p(x: np.ndarray, y: np.ndarray, stat: Callable[[np.ndarray, np.ndarray], float]) -> float | None:
    """Exact two-sided p-value: the share of all n! orderings of y whose |statistic| reaches the observed one."""
    observed = stat(x, y)
    if not math.isfinite(observed):
        return None
    hits = total = 0
    for perm in itertools.permutations(range(len(y))):
        value = stat(x, y[list(perm)])
        total += 1
        hits += math.isfinite(value) and abs(value) >= abs(observed) - 1e-12
    return hits / total


def correlate(
    figure: np.ndarray,
    per_prompt: np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Pearson, Spearman and Kendall between a benchmark figure per RM (``figure``, length m) and the
    downstream score (the mean over prompts of ``per_prompt``, shape (m, prompts)).

    Estimand: each statistic's correlation, across the population of RMs these were drawn from, between an RM's
    benchmark figure and its expected downstream score over the prompts' population.

    Fewer than ``MIN_RMS`` RMs: values None with the reason. Fewer than ``MIN_RMS_FOR_INTERVAL``: each
    statistic with its exact permutation p-value and no interval. From there: a 95% bias-corrected bootstrap
    interval, prompts and RMs resampled together (draws where a statistic is undefined, e.g. one RM drawn every
    time, are left out), and no p-value.
    """
    m = len(figure)
    scores = per_prompt.mean(axis=1)
    out: dict[str, Any] = {"n_rms": m}
    if m < MIN_RMS:
        for name in METHODS:
            out[name] = {"value": None, "ci95": None, "p_value": None}
        out["note"] = f"needs at least {MIN_RMS} reward models with a benchmark figure, has {m}"
        return out
    exact = m < MIN_RMS_FOR_INTERVAL
    draws = None
    if not exact:
        rng = np.random.default_rng(seed)
        n_prompts = per_prompt.shape[1]
        draws = [(rng.integers(0, m, size=m), rng.integers(0, n_prompts, size=n_prompts)) for _ in range(resamples)]
    for name in METHODS:
        stat = STATISTICS[name]
        value = stat(figure, scores)
        entry: dict[str, Any] = {"value": value if math.isfinite(value) else None}
        if exact:
            entry["ci95"] = None
            entry["p_value"] = permutation_p(figure, scores, stat) if entry["value"] is not None else None
            entry["method"] = "exact permutation test over all orderings of the RMs"
        else:
            values = np.array([stat(figure[r], per_prompt[np.ix_(r, p)].mean(axis=1)) for r, p in draws])
            entry["ci95"] = bias_corrected_interval(values, value) if entry["value"] is not None else None
            entry["p_value"] = None
            entry["method"] = f"bias-corrected bootstrap percentile, {resamples} draws resampling prompts and RMs"
        out[name] = entry
    return out


def summarize(
    scores: Sequence[Sequence[float]],
    grades: Sequence[Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    scale: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One RM over the prompts (each a row of n samples' scores and grades): its downstream score (E_n
    averaged over prompts) with a bootstrap 95% interval over prompts, its best-of-k curve, and how often its
    pick has the best grade. ``per_prompt`` (E_n of each prompt) is kept for the correlations' bootstrap."""
    n = len(grades[0])
    ks = ks_for(n)
    per_k = np.array([curve(s, g, ks) for s, g in zip(scores, grades)])  # prompts × ks
    per_prompt = per_k[:, -1]
    return {
        "score": float(per_prompt.mean()),
        "ci95": bootstrap_mean(per_prompt, resamples, seed, scale),
        "best_of_k": {str(k): float(v) for k, v in zip(ks, per_k.mean(axis=0))},
        "oracle_agreement": float(np.mean([oracle_agreement(s, g) for s, g in zip(scores, grades)])),
        "per_prompt": per_prompt,
    }


__all__ = [
    "METHODS",
    "MIN_RMS",
    "MIN_RMS_FOR_INTERVAL",
    "bias_corrected_interval",
    "bootstrap_mean",
    "correlate",
    "curve",
    "expected_pick",
    "ks_for",
    "oracle_agreement",
    "percentile_interval",
    "permutation_p",
    "summarize",
]
