"""95% intervals that say how little a few items tell: never of zero width over a non-empty group.

- A plain proportion (every outcome 0 or 1: a scenario's accuracy, a group's micro accuracy) gets the
  mid-p interval (``mid_p``): Clopper-Pearson's exact interval, ``[Beta(a/2; k, n-k+1), Beta(1-a/2; k+1,
  n-k)]`` (``clopper_pearson``, kept where a guarantee at every accuracy is the point: a judge's precision),
  over-covers by 2-5 points below 50 items; mid-p holds 95-97.5% on average from 5 items up.
- A mean of several scenarios' accuracies (a macro, RMB's mean of four cells) gets ``pooled_interval``:
  Wilson's interval at an effective size from each scenario's variance shrunk toward its goal's pooled one,
  widened by Student's t where that variance rests on few items. A scenario
  of one to four items says next to nothing of its own variance; an item bootstrap gives a one-item
  scenario none, and the Monte Carlo interval below was twice as wide as the truth there
  (``bench/calibration_uncertainty.py`` measures both; docs/calibration-uncertainty.md has the table).
- One scenario's or group's mean of outcomes in [0, 1] that are not all 0 or 1 (``--ties half``: a scenario's
  accuracy, a one-scenario cell, a micro accuracy) gets ``pooled_interval`` with one part (``ties_interval``):
  Wilson's interval at the effective size its outcomes' own variance gives, the rule the macro and style figures
  use, so a tie counts as the half it is, from ``FEW_ITEMS`` outcomes up, its width at least an all-won outcome's
  (mid-p of n wins in n). Below ``FEW_ITEMS`` it is the hull of mid-p's intervals at the whole counts either side
  of the sum (conservative there: 98.3-99.6% exactly at 5 and 9 items; each end rises with each outcome). It
  replaced Clopper-Pearson carried through the mean by Monte Carlo (``scenario_draws`` + ``weighted_interval``:
  each tie a fair coin), which covered 98.0-99.6%
  (averaged over accuracies; 99.8% at one) from 20 to 200 items with 10-30% ties (bench/calibration.py's
  ``ties_checks``; docs/calibration.md); those two functions remain for the bench's rows of the intervals
  replaced (``SetDraws.draws`` makes the draws when they are asked for).

Draws are seeded per stratum (a scenario, a goal), so a figure's interval does not move when other
scenarios are added. ``FEW_ITEMS`` is the count below which a figure is marked as resting on few items.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Collection, Mapping, Sequence

import numpy as np

ALPHA = 0.05
DEFAULT_DRAWS = 4000
# the most Monte Carlo draws evaluate takes, and a page redraws a file's intervals with (25 times the default)
MAX_DRAWS = 100_000
FEW_ITEMS = 10
FEW_MARK = "†"  # beside a figure over fewer than FEW_ITEMS items, in every report, plot and page
METHOD = (
    "mid-p (Clopper-Pearson with the observed count's probability halved) for proportions; for one group's mean "
    "with ties counted half, Wilson's interval at the effective size of its outcomes' own variance (never "
    "narrower than mid-p's of all won; below 10 outcomes the hull of mid-p's at the whole counts either side of "
    "the sum); "
    "for means of several scenario accuracies, Wilson's interval at the Korn-Graubard effective size, each "
    "scenario's variance shrunk toward its goal's pooled variance (never below its own with half a win and half a "
    "loss added: p(1-p) at its smoothed mean for 0/1 outcomes; a scenario of fewer than 10 outcomes never below "
    "the largest p(1-p) its own mid-p interval allows), "
    "with Student's t on the variance's Satterthwaite degrees of freedom, widened to hold mid-p of the share of wins "
    "where every scenario holds one item (see rmb_build/core/intervals.py)"
)


def few_items(n: int) -> bool:
    """Whether a figure over ``n`` items rests on too few of them to be read without its interval."""
    return 0 < n < FEW_ITEMS


# what FEW_MARK beside an interval means (few_item_scenarios), in every report, card and page
POOLED_FEW_NOTE = f"it pools scenarios of fewer than {FEW_ITEMS} items and is wider than a 95% interval needs"


def few_count_note(unit: str = "items") -> str:
    """What FEW_MARK beside a count of ``unit`` means, in every report, card and page: the figure's interval there is
    conservative (mid-p holds the truth in 97-100% of draws below 10 items, docs/calibration.md), not a 95% one."""
    return (
        f"fewer than {FEW_ITEMS} {unit}: read the figure with its interval, which is conservative there "
        "(wider than 95% needs)"
    )


# FEW_MARK's two meanings in one line, under a table that marks counts and intervals
FEW_NOTE = f"{FEW_MARK} beside a count: {few_count_note()}; beside an interval: {POOLED_FEW_NOTE}"


def few_item_scenarios(sizes: Sequence[int]) -> int:
    """How many scenarios of fewer than ``FEW_ITEMS`` items a pooled interval over scenarios of these sizes pools:
    its interval is conservative there (``plausible_variance``). One scenario's interval is its own: 0."""
    return sum(few_items(n) for n in sizes) if len(sizes) > 1 else 0


def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> list[float]:
    """The exact two-sided interval of a proportion ``k / n`` (n > 0)."""
    from scipy.stats import beta

    if n <= 0:
        raise ValueError("an interval needs at least one item")
    lo = 0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return [lo, hi]


def mid_p(k: int, n: int, alpha: float = ALPHA) -> list[float]:
    """The mid-p interval of a proportion ``k / n`` (n > 0): Clopper-Pearson's construction with the observed
    count's own probability counted half, ``P(X > k) + P(X = k)/2 = a/2`` at the lower end and ``P(X < k) +
    P(X = k)/2 = a/2`` at the upper, 0 and 1 at the ends.

    Estimand: the probability that the RM wins an item drawn from the group's population. Clopper-Pearson holds
    at least 95% at every accuracy and so holds 97-100% on average below 50 items (docs/calibration.md); mid-p
    holds 95-97.5% on average from 5 items up, never under 92.5% at an accuracy of 0.4-0.95 there (exact:
    bench/calibration_exact.py; Agresti and Gottard 2007; Brown, Cai and DasGupta 2001 recommend it beside
    Wilson and Jeffreys, which fall to 80-90% at some accuracies)."""
    from scipy.optimize import brentq
    from scipy.special import bdtr, bdtrc  # P(X <= j) and P(X > j): C ufuncs, 100x faster than scipy.stats'

    if n <= 0:
        raise ValueError("an interval needs at least one item")
    half = alpha / 2

    def at_k(p: float) -> float:  # P(X = k)
        return float(bdtr(k, n, p) - (bdtr(k - 1, n, p) if k > 0 else 0.0))

    def above(p: float) -> float:
        return float(bdtrc(k, n, p)) + 0.5 * at_k(p) - half

    def below(p: float) -> float:
        return (float(bdtr(k - 1, n, p)) if k > 0 else 0.0) + 0.5 * at_k(p) - half

    lo = 0.0 if k <= 0 else float(brentq(above, 0.0, 1.0, xtol=1e-12))
    hi = 1.0 if k >= n else float(brentq(below, 0.0, 1.0, xtol=1e-12))
    return [lo, hi]


@lru_cache(maxsize=4096)
def plausible_variance(k: int, n: int) -> float:
    """The largest ``p (1 - p)`` over the mid-p interval of ``k`` wins in ``n``: the variance of an outcome that
    those few items cannot rule out (0.25 wherever the interval holds one half)."""
    lo, hi = mid_p(k, n)
    return 0.25 if lo <= 0.5 <= hi else max(lo * (1 - lo), hi * (1 - hi))


def _plausible_variance_of(outcomes: np.ndarray) -> float:
    """``plausible_variance`` of outcomes in [0, 1]: their sum's whole counts either side (a tie's 0.5 or a style
    record's fraction spreads less than a win or a loss, ``p (1 - p)`` bounds it), so a tie never narrows the
    interval below an outcome all won's."""
    total, n = float(np.sum(outcomes)), len(outcomes)
    low, high = int(np.floor(total + 1e-9)), int(np.ceil(total - 1e-9))
    return max(plausible_variance(low, n), plausible_variance(high, n))


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
    """The interval of one group's mean outcome: mid-p when every outcome is 0 or 1, else ``ties_interval``
    (``draws`` and ``seed`` are no longer read: both rules are deterministic)."""
    outcomes = np.asarray(outcomes, dtype=float)
    if is_proportion(outcomes):
        return mid_p(int(outcomes.sum()), len(outcomes))
    return ties_interval(outcomes, stratum)


def ties_interval(outcomes: np.ndarray, pool: str = "") -> list[float]:
    """The 95% interval of one group's mean of outcomes in [0, 1] not all 0 or 1 (ties counted half).

    Estimand: the expected outcome of an item drawn from the group's population, ``P(win) + P(tie) / 2``.

    Below ``FEW_ITEMS`` outcomes: the hull of mid-p's intervals at the whole counts either side of the sum, so that
    each end rises with each outcome. From there: ``pooled_interval`` over one part (its variance the outcomes' own,
    Wilson at the effective size, Student's t), widened about its centre, where it is narrower, to the width of
    mid-p's interval of ``n`` wins in ``n``: ties never make a figure look surer than all won. That floor binds
    where nearly every
    outcome is a tie (one tie of one: [0.030, 0.970] before; twenty ties of twenty: [0.478, 0.522] before, which
    held a 90% tie share's accuracy 81.8% of the time at its least, 93.1% on average, and holds it 97.7% and 99.1%
    now); at 10-60% ties on 10-50 items the exact coverage is the same to 0.01 points with it or without.
    Averaged over accuracies it covers 95.2-96.8% from 20 to 200 items with 10% and 30% ties (``ties_checks``,
    2,000 draws, seed 0; exactly 95.5-96.3% at 20 and 50), where the Monte Carlo Clopper-Pearson interval it
    replaced covered 98.0-99.6% at 16-46% more width; at 5 and 9 items 98.3-99.6% exactly (99.4-99.9% before),
    over the band as mid-p is there (docs/calibration.md)."""
    outcomes = np.asarray(outcomes, dtype=float)
    n = len(outcomes)
    if n < FEW_ITEMS:
        # From the outcomes' sum alone, the two whole counts either side: mid-p's ends rise with the count, so a tie
        # never reads less sure than a loss would (Wilson at so few outcomes' effective size took 8 wins and a tie
        # to [0.257, 0.999] beside 8 wins and a loss's [0.561, 0.994]).
        total = float(np.sum(outcomes))
        return [mid_p(int(np.floor(total + 1e-9)), n)[0], mid_p(int(np.ceil(total - 1e-9)), n)[1]]
    lo, hi = pooled_interval([(1.0, outcomes, pool)])
    won = mid_p(n, n)
    if hi - lo < won[1] - won[0]:
        need, centre = won[1] - won[0], (lo + hi) / 2
        lo = min(max(0.0, centre - need / 2), 1.0 - need)
        hi = lo + need
    return [lo, hi]


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


def macro_interval(members: Collection[str], outcomes: Mapping[str, np.ndarray]) -> list[float]:
    """The interval of the plain mean of the members' accuracies (``members``: scenario ids, keys of ``outcomes``):
    one scenario's own interval (``mean_interval``: mid-p for 0/1 outcomes, ``ties_interval`` else); over several,
    ``pooled_interval`` with each scenario's variance shrunk toward its goal's. Where every member holds one 0/1
    outcome the macro is the group's share of wins, and its interval also holds that share's own (mid-p of the wins
    among the members): ``pooled_interval`` alone fell to 87.5-92% at the least favourable accuracy for two to six
    such scenarios (docs/calibration-uncertainty.md)."""
    if len(members) == 1:
        (name,) = members
        return mean_interval(outcomes[name], stratum=goal_of(name))
    weight = 1.0 / len(members)
    if all(len(outcomes[s]) == 1 and is_proportion(outcomes[s]) for s in members):
        return _one_item_macro([(s, float(outcomes[s][0])) for s in members], weight)
    return pooled_interval([(weight, outcomes[s], goal_of(s)) for s in members])


def _one_item_macro(members: list[tuple[str, float]], weight: float) -> list[float]:
    """The macro of one-item scenarios (each outcome 0 or 1): ``pooled_interval`` and mid-p of the wins joined,
    then made monotone in the wins. The two rules cross (the pooled one is skewed near 0 or all wins), so 12
    one-item scenarios gave 11 wins a lower end of 0.463 below 10 wins' 0.496. The lower end is the least over
    this layout with any of its losses turned to wins (losses turned in the members' order), the upper end the
    greatest with any of its wins turned to losses: wider only, so coverage cannot drop."""
    wins = [name for name, x in members if x == 1.0]
    losses = [name for name, x in members if x != 1.0]

    def joined(won: set[str]) -> list[float]:
        pooled = pooled_interval([(weight, np.array([1.0 if n in won else 0.0]), goal_of(n)) for n, _ in members])
        low, high = mid_p(len(won), len(members))
        return [min(pooled[0], low), max(pooled[1], high)]

    more = [joined(set(wins) | set(losses[:j])) for j in range(len(losses) + 1)]
    fewer = [joined(set(wins[j:])) for j in range(len(wins) + 1)]
    return [min(b[0] for b in more), max(b[1] for b in fewer)]


def goal_of(scenario: str) -> str:
    """The pool a scenario's variance is estimated in: its goal."""
    from rmb_build.core.taxonomy import parse_scenario_id

    return parse_scenario_id(scenario).goal


# How many items' worth of its prior each scenario's own variance is shrunk toward (see pooled_interval): 4 held
# the calibration suite's layouts in 93-98% (docs/calibration.md); the pool alone, with no floor at the scenario's
# own mean, held a goal of one large sure scenario and eight one-item unsure ones 32% of the time.
POOL_PRIOR_ITEMS = 4.0
# How much of an item of difference 1 joins a scenario's paired differences in the floor of its variance
# (pooled_difference): 0.3 let two equal RMs on a goal of one large sure scenario and eight one-item ones be told
# apart in 7.6% of 1,200 draws; 0.5 kept them apart in under 2% of draws on releases of 1-200-item scenarios
# (nominal 5%); 0.4 holds both (docs/calibration-uncertainty.md).
DIFFERENCE_FLOOR_ITEMS = 0.4
# How far under a scenario's own floored variance of the differences its pool's may sit before the floor replaces it
# (pooled_difference): one to four paired differences cannot tell a variance within a factor of about 2 (a one-item
# scenario's floored variance is 0.2 or 0.45 whatever its truth), so the floor taken wherever it exceeded the pool
# (main to this change) made a release of 1-4-item scenarios over-cover (97.3-98.7%); a pool under a third of the
# floor is a large, sure scenario's, which the floor exists to refuse. 3 puts releases of 1-4 and 1-200 items at
# 94.8-96.3% (10 releases x 60 draws) and keeps two equal RMs at p >= 0.05 in 95.6-99.2% of 1,200 draws on the
# uneven goals of tests/core/test_intervals.py; 2 left the p-value on 1-4 items at 97.2% (docs/calibration-uncertainty.md).
DIFFERENCE_FLOOR_RATIO = 3.0


def pooled_interval(parts: Sequence[tuple[float, np.ndarray, str]], alpha: float = ALPHA) -> list[float]:
    """The 95% interval of ``F = sum_s w_s theta_s`` from (w_s, scenario s's outcomes, its pool).

    Estimand: the weighted sum of the scenarios' accuracies over each scenario's population of items (the
    scenarios fixed, each one's items a sample of it), ``theta_s`` the expected outcome of an item of s.

    ``Var(F^) = sum_s w_s^2 sigma_s^2 / n_s``. ``sigma_s^2`` is scenario s's own within-scenario variance shrunk
    toward a prior: ``(SS_s + k prior_s) / (n_s - 1 + k)``, ``k = POOL_PRIOR_ITEMS``, so a scenario of one to
    four items rests on its prior and one of 200 on itself. ``prior_s`` is its pool's variance, but never less
    than the scenario's own variance once half a win and half a loss join its outcomes (for 0/1 outcomes ``p (1
    - p)`` at the mean so smoothed, the largest variance an outcome in [0, 1] of that mean can have; for
    fractions, such as a style record's share of its cells, their own spread): a goal whose pool is one large,
    sure scenario would otherwise lend its small variance to small, unsure ones. A scenario of fewer than
    ``FEW_ITEMS`` outcomes gets at least ``plausible_variance``, the largest its own mid-p interval allows (of the
    whole counts either side of its sum, for ties and fractions): a
    3-item scenario at 0.5 all won floored at 0.11 left a goal of 200 items at 0.95, 3 at 0.5 and 30 at 0.9 at 86.8%
    coverage (99.2% with it; docs/calibration.md). Such a figure is conservative, over 97%, and marked
    (``few_item_scenarios``); where every scenario holds ``FEW_ITEMS`` or more the rule is unchanged. The pool's variance is the residuals around each
    scenario's own mean over their degrees of freedom, with one pseudo-degree of freedom at the pool's largest
    possible variance ``m (1 - m)`` (m its mean outcome) to keep it off 0; a pool of one-item scenarios uses
    the residuals around the pool's mean (between-scenario spread included: wider). The
    interval is Wilson's score interval at the Korn and Graubard effective size: ``n* = F^(1 - F^) / Var^``
    (the weights' own effective size where the variance is 0), times ``(z / t_df)^2`` with ``df`` the
    variance's Satterthwaite degrees of freedom (``n_s - 1 + k`` a scenario, the prior counted as independent:
    approximate), so a variance estimated from few items widens the interval. It stays inside [0, W] and
    never has zero width. A weight or outcome that is not finite is a ValueError.
    """
    from statistics import NormalDist

    from scipy.special import stdtrit

    weights = np.array([w for w, _, _ in parts], dtype=float)
    total = float(weights.sum())
    w = weights / total
    if abs(total - round(total)) < 1e-12:  # 1/k weights: their sum is 1 up to rounding, the figure's range [0, 1]
        total = float(round(total))
    s = _ShrunkVariances(parts, weights, "outcomes")
    means, sizes, variance, scenario_df = s.means, s.sizes, s.variance, s.scenario_df
    estimate = float(np.sum(w * means))
    if min(estimate, 1 - estimate) < 1e-12:  # all won or all lost: 1/k weights sum to 0.999... (a spread of 2e-16)
        estimate = float(round(estimate))
    terms = w**2 * variance / sizes
    var = float(terms.sum())
    kish = 1.0 / float(np.sum(w**2 / sizes))
    spread = estimate * (1 - estimate)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    if var > 0 and spread > 0:
        dof = var * var / float(np.sum(terms**2 / scenario_df))
        n = spread / var * (z / float(stdtrit(dof, 1 - alpha / 2))) ** 2
    else:
        n = kish
    centre = (estimate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(spread / n + z * z / (4 * n * n))
    low, high = max(0.0, min(estimate, float(centre - half))), min(1.0, max(estimate, float(centre + half)))
    return [total * low, total * high]


class _ShrunkVariances:
    """Each scenario's mean, size, and variance shrunk toward its prior (``pooled_interval``'s rule), of
    ``outcomes`` in [0, 1] or paired ``differences`` in [-1, 1]; the one rule both pooled figures read.

    The pool's pseudo-degree of freedom sits at the largest variance its values can have (``m (1 - m)``; for
    differences, their variance once a pseudo pair (+1, -1) joins them); the floor is each scenario's own
    second moment with a pseudo item at the far end added (outcomes: ``p (1 - p)`` at the mean with half a win and
    half a loss added)."""

    def __init__(self, parts: Sequence[tuple[float, np.ndarray, str]], weights: np.ndarray, kind: str) -> None:
        values = [np.asarray(v, dtype=float) for _, v, _ in parts]
        sizes = np.array([len(v) for v in values], dtype=float)
        if np.any(sizes == 0):
            raise ValueError("an interval needs at least one item per scenario")
        if not np.all(np.isfinite(weights)) or not all(np.all(np.isfinite(v)) for v in values):
            raise ValueError("an interval needs finite weights and outcomes")
        means = np.array([float(v.mean()) for v in values])
        squares = np.array([float(np.sum((v - m) ** 2)) for v, m in zip(values, means)])
        pools: dict[str, list[int]] = {}
        for i, (_, _, pool) in enumerate(parts):
            pools.setdefault(pool, []).append(i)
        pool_variance = np.zeros(len(parts))
        for members in pools.values():
            pooled = np.concatenate([values[i] for i in members])
            m = float(pooled.mean())
            pseudo = m * (1 - m) if kind == "outcomes" else float(np.var(np.concatenate([pooled, [1.0, -1.0]])))
            within, df = float(squares[members].sum()), int(sizes[members].sum()) - len(members)
            if df == 0:  # one item a scenario: the spread around the pool's mean (scenarios' differences included)
                within, df = float(np.sum((pooled - m) ** 2)), len(pooled) - 1
            pool_variance[members] = (within + pseudo) / (df + 1)
        # the scenario's own variance once one pseudo item joins it: outcomes, half a win and half a loss (for 0/1
        # outcomes exactly p (1 - p) at p = (wins + 1/2) / (n + 1), Jeffreys); differences, DIFFERENCE_FLOOR_ITEMS of 1
        pseudo_mean, pseudo_square = (0.5, 0.5) if kind == "outcomes" else (0.0, DIFFERENCE_FLOOR_ITEMS)
        second = (squares + sizes * means**2 + pseudo_square) / (sizes + 1)
        own = second - ((means * sizes + pseudo_mean) / (sizes + 1)) ** 2
        self.means, self.sizes = means, sizes
        self.scenario_df = sizes - 1 + POOL_PRIOR_ITEMS
        # outcomes: the floor wherever it exceeds the pool; differences: only where the pool is implausibly small for
        # the scenario (under 1 / DIFFERENCE_FLOOR_RATIO of its own floored variance), else the pool
        floored = own > (pool_variance if kind == "outcomes" else DIFFERENCE_FLOOR_RATIO * pool_variance)
        prior = np.where(floored, own, pool_variance)
        self.variance = (squares + POOL_PRIOR_ITEMS * prior) / self.scenario_df
        if kind == "outcomes":  # few outcomes: never below the variance their own interval cannot rule out
            for i, v in enumerate(values):
                if few_items(len(v)):
                    self.variance[i] = max(self.variance[i], _plausible_variance_of(v))


def pooled_difference(
    parts: Sequence[tuple[float, np.ndarray, str]], alpha: float = ALPHA
) -> dict[str, float | list[float]]:
    """``{"diff", "ci95", "p"}`` of ``D = sum_s w_s delta_s`` from (w_s, scenario s's paired differences A - B,
    its pool), for a figure over several scenarios.

    Estimand: the weighted sum of the scenarios' expected differences ``delta_s`` between two RMs, each over its
    scenario's population of items (the scenarios fixed, the items a sample both RMs scored).

    ``Var(D^) = sum_s w_s^2 sigma_s^2 / n_s``, ``sigma_s^2`` scenario s's own variance of the differences shrunk
    toward its pool's as in ``pooled_interval``, the prior the pool's variance unless that is under
    ``1 / DIFFERENCE_FLOOR_RATIO`` of the scenario's own differences' variance with ``DIFFERENCE_FLOOR_ITEMS`` of an
    item of difference 1 added to their second moment, then that floored variance (a pool so far under it is a large,
    sure scenario's; within that factor one to four differences cannot tell the two apart, and taking the larger
    over-covered); the pool's has one pseudo-degree of freedom at the variance the
    pool's differences have once a pseudo pair (+1, -1) joins them, so two RMs that agree on every item still get
    a non-zero width. The interval is ``D^ +- t SE`` (Student's t on the variance's Satterthwaite degrees of
    freedom), clipped to [-W, W]; the two-sided p-value is the same t's, so the interval excludes 0 exactly when
    p < ``alpha``.
    """
    from scipy.special import stdtr, stdtrit

    weights = np.array([w for w, _, _ in parts], dtype=float)
    s = _ShrunkVariances(parts, weights, "differences")
    means, scenario_df = s.means, s.scenario_df
    terms = weights**2 * s.variance / s.sizes
    diff = float(np.sum(weights * means))
    se = float(np.sqrt(terms.sum()))
    dof = float(terms.sum() ** 2 / np.sum(terms**2 / scenario_df))
    bound = float(weights.sum())
    q = float(stdtrit(dof, 1 - alpha / 2))
    p = float(2 * stdtr(dof, -abs(diff) / se))
    return {"diff": diff, "ci95": [max(-bound, diff - q * se), min(bound, diff + q * se)], "p": min(1.0, p)}


__all__ = [
    "ALPHA",
    "adjusted_wald",
    "DEFAULT_DRAWS",
    "Draws",
    "FEW_ITEMS",
    "FEW_MARK",
    "METHOD",
    "clopper_pearson",
    "mid_p",
    "few_items",
    "goal_of",
    "macro_interval",
    "mean_interval",
    "pooled_difference",
    "pooled_interval",
    "scenario_draws",
    "ties_interval",
    "weighted_interval",
]
