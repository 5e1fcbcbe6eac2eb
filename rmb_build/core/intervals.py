"""95% intervals that say how little a few items tell: never of zero width over a non-empty group.

- A plain proportion (every outcome 0 or 1: a scenario's accuracy, a group's micro accuracy) gets the
  exact Clopper-Pearson interval: ``[Beta(a/2; k, n-k+1), Beta(1-a/2; k+1, n-k)]``, 0 and 1 at the ends.
- Any other figure (a macro mean of scenario accuracies, RMB's mean of four cells, outcomes of 0.5 under
  ``--ties half``) is a weighted sum of per-scenario means of outcomes in [0, 1]. Its interval is the
  Clopper-Pearson construction carried through the sum by Monte Carlo: each draw turns every outcome
  into a Bernoulli of that mean (a tie is a fair coin; 0 and 1 stay as they are), counts each scenario's
  successes ``K``, draws a lower value from ``Beta(K, n-K+1)`` and an upper one from ``Beta(K+1, n-K)``,
  and sums them with the figure's weights; the interval is the 2.5% quantile of the lower sums and the
  97.5% quantile of the upper sums. For one scenario of 0/1 outcomes this is Clopper-Pearson itself;
  ``tests/core/test_intervals.py`` simulates its coverage (at least 0.93 at nominal 0.95 for 3 to 20 items a
  scenario, accuracies 0.5 to 0.95, macro means and ties included).

Draws are seeded per stratum (a scenario, a goal), so a figure's interval does not move when other
scenarios are added. ``FEW_ITEMS`` is the count below which a figure is marked as resting on few items.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

ALPHA = 0.05
DEFAULT_DRAWS = 4000
FEW_ITEMS = 10
FEW_MARK = "†"  # beside a figure over fewer than FEW_ITEMS items, in every report, plot and page
METHOD = (
    "Clopper-Pearson for proportions; for means of scenario accuracies and for ties counted half, "
    "Clopper-Pearson carried through the weighted sum by seeded Monte Carlo (see rmb_build/core/intervals.py)"
)


def few_items(n: int) -> bool:
    """Whether a figure over ``n`` items rests on too few of them to be read without its interval."""
    return 0 < n < FEW_ITEMS


def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> list[float]:
    """The exact two-sided interval of a proportion ``k / n`` (n > 0)."""
    from scipy.stats import beta

    if n <= 0:
        raise ValueError("an interval needs at least one item")
    lo = 0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return [lo, hi]


def is_proportion(outcomes: np.ndarray) -> bool:
    return bool(np.all((outcomes == 0) | (outcomes == 1)))


def _rng(seed: int, stratum: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(stratum.encode("utf-8"))])


@dataclass(frozen=True)
class Draws:
    """One scenario's Monte Carlo lower and upper draws of its mean outcome (``draws`` values each)."""

    lower: np.ndarray
    upper: np.ndarray


def scenario_draws(outcomes: np.ndarray, draws: int, seed: int, stratum: str) -> Draws:
    """The lower and upper draws of a scenario's mean (see the module docstring), seeded per stratum."""
    n = len(outcomes)
    if n == 0:
        raise ValueError("an interval needs at least one item")
    rng = _rng(seed, stratum)
    sure = int(np.sum(outcomes >= 1))
    partial = outcomes[(outcomes > 0) & (outcomes < 1)]
    k = np.full(draws, sure, dtype=np.int64)
    if len(partial):
        k += (
            (rng.random((draws, len(partial))) < partial).sum(axis=1)
            if len(partial) * draws <= 4_000_000
            else sum(rng.binomial(1, p, size=draws) for p in partial)
        )
    lower = np.zeros(draws)
    upper = np.ones(draws)
    some, short = k > 0, k < n
    lower[some] = rng.beta(k[some], n - k[some] + 1)
    upper[short] = rng.beta(k[short] + 1, n - k[short])
    return Draws(lower, upper)


def weighted_interval(parts: Sequence[tuple[float, Draws]], alpha: float = ALPHA) -> list[float]:
    """The interval of ``sum(weight * scenario mean)`` from each scenario's (weight, draws)."""
    lower = np.sum([w * d.lower for w, d in parts], axis=0)
    upper = np.sum([w * d.upper for w, d in parts], axis=0)
    return [float(np.quantile(lower, alpha / 2)), float(np.quantile(upper, 1 - alpha / 2))]


def mean_interval(outcomes: np.ndarray, draws: int = DEFAULT_DRAWS, seed: int = 0, stratum: str = "") -> list[float]:
    """The interval of one group's mean outcome: Clopper-Pearson when every outcome is 0 or 1."""
    outcomes = np.asarray(outcomes, dtype=float)
    if is_proportion(outcomes):
        return clopper_pearson(int(outcomes.sum()), len(outcomes))
    return weighted_interval([(1.0, scenario_draws(outcomes, draws, seed, stratum))])


def adjusted_wald(parts: Sequence[tuple[float, np.ndarray]], alpha: float = ALPHA) -> list[float]:
    """The normal interval of ``sum(weight * mean(outcomes))`` over groups of outcomes in [0, 1], each group's
    variance of its mean taken from its outcomes with one 1 and one 0 added (Agresti and Caffo's adjustment for a
    linear combination of proportions: ``p(1-p)/n`` at ``p = (k+1)/(n+2)`` for 0/1 outcomes), so never 0 for a
    group all won or all lost; centred on the plain estimate and clipped to [0, 1]."""
    from scipy.stats import norm

    value, var = 0.0, 0.0
    for weight, outcomes in parts:
        o = np.asarray(outcomes, dtype=float)
        if len(o) == 0:
            raise ValueError("an interval needs at least one item")
        value += weight * float(o.mean())
        var += weight * weight * float(np.var(np.concatenate([o, [0.0, 1.0]]))) / len(o)
    half = float(norm.ppf(1 - alpha / 2)) * float(np.sqrt(var))
    return [float(max(0.0, value - half)), float(min(1.0, value + half))]


def macro_interval(members: Mapping[str, Draws], outcomes: Mapping[str, np.ndarray]) -> list[float]:
    """The interval of the plain mean of the members' accuracies (exact for a single 0/1 scenario)."""
    if len(members) == 1:
        (name,) = members
        if is_proportion(outcomes[name]):
            return clopper_pearson(int(outcomes[name].sum()), len(outcomes[name]))
    weight = 1.0 / len(members)
    return weighted_interval([(weight, d) for d in members.values()])


__all__ = [
    "ALPHA",
    "adjusted_wald",
    "DEFAULT_DRAWS",
    "Draws",
    "FEW_ITEMS",
    "FEW_MARK",
    "METHOD",
    "clopper_pearson",
    "few_items",
    "macro_interval",
    "mean_interval",
    "scenario_draws",
    "weighted_interval",
]
