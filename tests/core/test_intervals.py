"""95% intervals: never of zero width over a non-empty group, and coverage of at least 0.93 at nominal 0.95.

Coverage of a proportion's interval is computed exactly (a sum over the binomial outcomes); the figures
that are not a plain proportion (macro means, ties counted half) are simulated, seeded. A percentile
bootstrap, the method these replace, fails both: 0.86 at n=3, accuracy 0.95, and [1, 1] for 3 of 3.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom

from rmb_build.core.intervals import (
    FEW_ITEMS,
    clopper_pearson,
    macro_interval,
    mean_interval,
    ties_interval,
)
from rmb_build.evaluate.metrics import build_results
from rmb_build.stages.gold import agreement

SIZES = (3, 5, 10, 20)
ACCURACIES = (0.5, 0.8, 0.95)
BAR = 0.93
MACRO_BAR = 0.92


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("accuracy", ACCURACIES)
def test_a_proportions_interval_covers_exactly(n, accuracy):
    """Exact coverage of a scenario's accuracy interval: every count k weighted by its binomial probability."""
    coverage = sum(
        binom.pmf(k, n, accuracy)
        for k in range(n + 1)
        if clopper_pearson(k, n)[0] <= accuracy <= clopper_pearson(k, n)[1]
    )
    assert coverage >= 0.95 - 1e-9


def _simulated(n: int, accuracy: float, trials: int, draw) -> float:
    rng = np.random.default_rng([n, int(accuracy * 100)])
    hits = 0
    for t in range(trials):
        truth, lo_hi = draw(rng, t)
        hits += lo_hi[0] <= truth <= lo_hi[1]
    return hits / trials


@pytest.mark.parametrize("n,accuracy", list(itertools.product(SIZES, ACCURACIES)))
def test_macro_and_ties_half_intervals_cover(n, accuracy):
    """Simulated coverage of a macro over three scenarios of n items (accuracies around ``accuracy``) and of
    one scenario whose outcomes include ties counted half."""
    accuracies = [accuracy, max(0.0, accuracy - 0.3), min(1.0, accuracy + 0.04)]

    def macro(rng, t):
        outcomes = {f"s{i}": (rng.random(n) < a).astype(float) for i, a in enumerate(accuracies)}
        return float(np.mean(accuracies)), macro_interval(list(outcomes), outcomes)

    wins, ties = max(accuracy - 0.2, 0.0), 0.3 if accuracy < 0.9 else 0.1

    def ties_half(rng, t):
        u = rng.random(n)
        outcomes = np.where(u < wins, 1.0, np.where(u < wins + ties, 0.5, 0.0))
        return wins + 0.5 * ties, mean_interval(outcomes, 600, t, "ties")

    # The macro interval is calibrated (0.934 to 0.974 over 2,000 trials in these cases), not conservative: its
    # 400-trial coverage has an SD of about 0.011, so its bar sits 2.5 SDs below nominal.
    assert _simulated(n, accuracy, 400, macro) >= MACRO_BAR
    assert _simulated(n, accuracy, 200, ties_half) >= BAR


def _intervals(node):
    """Every [lo, hi] in a results.json object, with the path that leads to it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.startswith("ci95") and isinstance(value, list):
                yield key, value
            elif key.startswith("ci95") and isinstance(value, dict):
                yield from ((f"{key}/{k}", v) for k, v in value.items() if v is not None)
            else:
                yield from ((f"{key}/{p}", v) for p, v in _intervals(value))


@pytest.mark.parametrize("ties", ["strict", "half"])
def test_no_interval_of_zero_width_even_on_unanimous_groups(ties):
    """All right, all wrong, all tied, one item: every interval of results.json is wider than zero."""
    preds = []
    for uid, (set_name, scenario, outcome) in enumerate(
        [("pairwise", "Helpfulness/Chat/Discussion", 1.0)] * 5
        + [("pairwise", "Harmlessness/S6", 0.0)] * 3
        + [("pairwise", "Helpfulness/Code/Documentation", 0.5 if ties == "half" else 1.0)] * 4
        + [("bon", "Harmlessness/S6", 1.0)]
        + [("bon", "Helpfulness/Chat/Discussion", 0.0)] * 2
    ):
        preds.append({"set": set_name, "uid": str(uid), "scenario": scenario, "outcome": outcome})
    results = build_results(preds, rm="x", release="r", ties=ties, resamples=500)
    found = list(_intervals(results))
    assert len(found) > 20
    for path, (lo, hi) in found:
        assert 0.0 <= lo < hi <= 1.0, path
    assert results["bon"]["scenarios"]["Harmlessness/S6"]["ci95"] == pytest.approx([0.05, 1.0])  # mid-p of 1/1
    assert results["bon"]["scenarios"]["Harmlessness/S6"]["few_items"] is True
    assert results["rmb_overall"]["few_items"] == [
        "pairwise/Helpfulness",
        "pairwise/Harmlessness",
        "bon/Helpfulness",
        "bon/Harmlessness",
    ]


def _mid_p_by_definition(k: int, n: int) -> list[float]:
    """The mid-p ends by bisection on the binomial sums written out (no scipy)."""
    from math import comb

    def pmf(j, p):
        return comb(n, j) * p**j * (1 - p) ** (n - j)

    def solve(f, rising):  # the p in (0, 1) where f(p) = 0.025
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if (f(mid) < 0.025) == rising else (lo, mid)
        return lo

    lower = 0.0 if k == 0 else solve(lambda p: sum(pmf(j, p) for j in range(k + 1, n + 1)) + pmf(k, p) / 2, True)
    upper = 1.0 if k == n else solve(lambda p: sum(pmf(j, p) for j in range(k)) + pmf(k, p) / 2, False)
    return [lower, upper]


def test_a_proportions_interval_is_mid_p_and_seeded_draws_repeat():
    outcomes = np.array([1.0] * 7 + [0.0] * 3)
    assert mean_interval(outcomes) == pytest.approx(_mid_p_by_definition(7, 10), abs=1e-6)
    assert mean_interval(outcomes) == pytest.approx([0.3801, 0.9174], abs=1e-4)  # OpenEpi's mid-p; CP: [0.348, 0.933]
    for k, n in ((0, 1), (1, 1), (0, 5), (3, 5), (19, 20), (150, 200)):
        assert mean_interval(np.array([1.0] * k + [0.0] * (n - k))) == pytest.approx(
            _mid_p_by_definition(k, n), abs=1e-6
        )
    halves = np.array([1.0, 0.5, 0.5, 0.0, 1.0, 1.0])  # ties: deterministic, whatever the draws and seed
    assert mean_interval(halves, 800, 1, "s") == mean_interval(halves, 800, 2, "t") == ties_interval(halves)


def _ties_coverage(n: int, ties: float) -> np.ndarray:
    """Exact coverage of ``mean_interval`` over every (wins, ties, losses) of ``n`` items, each composition
    weighted by its multinomial probability, at decided-item win shares 0.4-0.95 (the accuracy ``(1 - ties) q +
    ties / 2``); an interval that draws (the one replaced) is computed once per composition, seeded."""
    from scipy.stats import multinomial

    grid = np.linspace(0.4, 0.95, 23)
    truth = (1 - ties) * grid + ties / 2
    coverage = np.zeros(len(grid))
    for w in range(n + 1):
        for t in range(n - w + 1):
            y = np.array([1.0] * w + [0.5] * t + [0.0] * (n - w - t))
            lo, hi = mean_interval(y, 400, 0, "ties")
            pmf = multinomial.pmf(
                [w, t, n - w - t], n, np.stack([(1 - ties) * grid, [ties] * len(grid), (1 - ties) * (1 - grid)], 1)
            )
            coverage += pmf * ((lo <= truth + 1e-12) & (truth - 1e-12 <= hi))
    return coverage


@pytest.mark.parametrize("n,ties", [(20, 0.3), (50, 0.3), (50, 0.1)])
def test_a_ties_half_interval_holds_95_percent_on_average_over_accuracies(n, ties):
    """Issue 47's band for a scenario's accuracy under ``--ties half``, exactly (no draws of items): the Monte Carlo
    Clopper-Pearson interval it replaced, each tie a fair coin, held 99.5%, 99.6% and 97.7% here (a tie spreads less
    than the coin it was drawn as); Wilson at the outcomes' own effective size holds the band."""
    coverage = _ties_coverage(n, ties)
    assert 0.93 <= coverage.mean() <= 0.97 and coverage.min() >= 0.9


def test_a_ties_half_interval_holds_where_nearly_every_outcome_is_a_tie():
    """90% ties on 20 items: an interval from the outcomes' own variance alone (twenty ties of twenty: [0.478,
    0.522]) held the accuracy 81.8% of the time at its least accuracy; never narrower than all won, 97.7%."""
    assert _ties_coverage(20, 0.9).min() >= 0.93


@pytest.mark.parametrize("n", range(1, FEW_ITEMS))
def test_a_ties_half_interval_never_falls_as_a_loss_becomes_a_tie_or_a_tie_a_win(n):
    """Below FEW_ITEMS, Wilson at the outcomes' effective size (a reviewer) read 8 wins and a tie as [0.257, 0.999]
    beside 8 wins and a loss's [0.561, 0.994]: a better outcome, a lower bound far lower. Each end rises with each
    outcome now (from FEW_ITEMS up a step from mid-p to Wilson can lower an end by under 0.001)."""
    for w in range(n + 1):
        for t in range(n - w + 1):
            y = np.array([1.0] * w + [0.5] * t + [0.0] * (n - w - t))
            lo, hi = mean_interval(y)
            for better in (i for i in range(n) if y[i] < 1):
                up = y.copy()
                up[better] += 0.5
                lo2, hi2 = mean_interval(up)
                assert lo2 >= lo - 1e-9 and hi2 >= hi - 1e-9, (w, t, better, (lo, hi), (lo2, hi2))


@pytest.mark.parametrize("n", [*range(1, FEW_ITEMS), FEW_ITEMS, 20])
def test_a_ties_half_interval_is_never_narrower_than_all_won(n):
    """No mix of wins, ties and losses is surer than n wins in n (one tie of one was [0.030, 0.970], twenty ties
    of twenty [0.478, 0.522], before the floor)."""
    from rmb_build.core.intervals import mid_p

    won = mid_p(n, n)
    for w in range(n + 1):
        for t in range(1, n - w + 1):
            lo, hi = mean_interval(np.array([1.0] * w + [0.5] * t + [0.0] * (n - w - t)))
            assert 0.0 <= lo <= (w + t / 2) / n <= hi <= 1.0
            assert hi - lo >= won[1] - won[0] - 1e-12, (w, t, n - w - t)


def test_the_gold_checks_agreement_on_tied_pairs_is_not_sure_of_itself():
    """Four gold pairs, all tied: 0.5, and an interval that says how little four ties tell (was [0.5, 0.5])."""
    tied = agreement([0.5] * 4, seed=0, stratum="Harmlessness")
    assert tied["value"] == 0.5 and tied["ties"] == 4
    lo, hi = tied["ci95"]
    assert lo < 0.2 and hi > 0.8


def test_a_pooled_interval_refuses_a_number_that_is_not_finite():
    from rmb_build.core.intervals import pooled_difference, pooled_interval

    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="finite"):
            pooled_interval([(0.5, np.array([1.0, bad]), "g"), (0.5, np.array([1.0]), "g")])
        with pytest.raises(ValueError, match="finite"):
            pooled_difference([(bad, np.array([1.0, 0.0]), "g"), (0.5, np.array([-1.0]), "g")])


def test_pooled_intervals_never_have_zero_width_even_over_one_item_scenarios():
    from rmb_build.core.intervals import pooled_difference, pooled_interval

    for outcomes in ([1.0], [0.0], [1.0, 1.0], [0.5]):
        parts = [(0.25, np.asarray(outcomes), "g") for _ in range(4)]
        lo, hi = pooled_interval(parts)
        assert 0 <= lo < hi <= 1 and lo <= float(np.mean(outcomes)) <= hi
        same = pooled_difference([(0.25, np.zeros(len(outcomes)), "g") for _ in range(4)])
        assert same["ci95"][0] < 0 < same["ci95"][1] and same["p"] == 1.0


@pytest.mark.parametrize(
    "sizes, accuracies",
    [
        ((200, 4), (0.99, 0.5)),
        ((200, 3, 3), (0.95, 0.5, 0.6)),
        ((100, 10), (0.9, 0.5)),
        ((200, 4, 4), (0.99, 0.5, 0.5)),
        ((200, 2, 2, 2, 2), (0.99, 0.5, 0.5, 0.5, 0.5)),
        ((200, 1, 1, 1, 1, 1, 1, 1, 1), (0.99, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5)),
        ((200, 3, 30), (0.95, 0.5, 0.9)),
        ((200, 5, 30), (0.95, 0.5, 0.9)),
    ],
)
def test_a_macro_of_one_large_sure_scenario_and_small_unsure_ones_covers(sizes, accuracies):
    """A goal's pooled variance is the large scenario's; the small ones' own is far larger. Pooled alone, the
    macro's interval held the truth in 40%, 67% and 80% of these 600 draws (the first three goals); shrunk toward
    the pool, 93-94% with one small scenario but 28-79% with several (a reviewer's goals, the next three); with the
    prior never below ``p (1 - p)`` at each scenario's own mean, 92.5-97%, and 88% on the goal of 200 items at 0.95,
    3 at 0.5 and 30 at 0.9 (a 3-item scenario all won floored at 0.11 against its true 0.25). With a scenario of
    fewer than 10 outcomes never below the variance its own mid-p interval allows (``plausible_variance``),
    94.7-100%."""
    from rmb_build.core.intervals import pooled_interval

    rng = np.random.default_rng(0)
    truth, held, draws = float(np.mean(accuracies)), 0, 600
    for _ in range(draws):
        parts = [(1 / len(sizes), (rng.random(n) < a).astype(float), "g") for n, a in zip(sizes, accuracies)]
        lo, hi = pooled_interval(parts)
        held += lo <= truth <= hi
    assert held / draws >= 0.93, held


@pytest.mark.parametrize(
    "sizes, accuracies",
    [
        ((200, 4), (0.99, 0.5)),
        ((100, 10), (0.9, 0.5)),
        ((200, 3, 3), (0.95, 0.5, 0.6)),
        ((200, 1, 1, 1, 1, 1, 1, 1, 1), (0.99, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5)),
        ((200, 2, 2, 2, 2), (0.99, 0.5, 0.5, 0.5, 0.5)),
        ((200, 2, 2, 2, 2, 2, 2), (0.97, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6)),
        ((300,) + (1,) * 12, (0.99,) + (0.5,) * 12),
    ],
)
def test_two_equal_rms_on_one_large_sure_scenario_and_small_unsure_ones_are_rarely_told_apart(sizes, accuracies):
    """rmb compare's test of two RMs of equal accuracy that share half their items' luck. With the goal's pooled
    variance alone, p >= 0.05 in 28-82% of 400 draws here; with each scenario's prior never below its own
    differences' variance (``DIFFERENCE_FLOOR_ITEMS`` of an item of difference 1 added), 95-100%; with 0.3 of an
    item, 92.4% on the goal of eight one-item scenarios over 1,200 draws; with the floor taken only where the pool is
    under a third of it (``DIFFERENCE_FLOOR_RATIO``), 95.6-99.2% of 1,200 draws."""
    from rmb_build.core.intervals import pooled_difference

    rng = np.random.default_rng(3)
    kept, draws = 0, 400
    for _ in range(draws):
        parts = []
        for n, a in zip(sizes, accuracies):
            luck = rng.random(n)
            other = np.where(rng.random(n) < 0.5, luck, rng.random(n))
            parts.append((1 / len(sizes), (luck < a).astype(float) - (other < a).astype(float), "g"))
        kept += pooled_difference(parts)["p"] >= 0.05
    assert kept / draws >= 0.93, kept


def test_two_equal_rms_on_small_scenarios_of_like_accuracy_are_told_apart_near_5_percent():
    """Scenarios of 1-4 items whose pool fits them (accuracies 0.6-0.8): the floor taken wherever it exceeded the
    pool (a one-item scenario's floored variance is 0.2 or 0.45 whatever its truth) kept two equal RMs at p >= 0.05
    in 490 of these 500 draws (98.0%), over issue 47's band; the floor only where the pool is under a third of it
    (``DIFFERENCE_FLOOR_RATIO``), 478 (95.6%). The uneven goals above keep 95.6-99.2% (1,200 draws)."""
    from rmb_build.core.intervals import pooled_difference

    rng = np.random.default_rng(0)
    k, draws, kept = 24, 500, 0
    sizes, accuracies = rng.integers(1, 5, k), rng.uniform(0.6, 0.8, k)
    for _ in range(draws):
        parts = []
        for n, a in zip(sizes, accuracies):
            luck = rng.random(n)
            other = np.where(rng.random(n) < 0.5, luck, rng.random(n))
            parts.append((1 / k, (luck < a).astype(float) - (other < a).astype(float), "Helpfulness"))
        kept += pooled_difference(parts)["p"] >= 0.05
    assert 0.93 <= kept / draws <= 0.97, kept


def test_the_pooled_difference_interval_excludes_0_exactly_when_p_is_below_005():
    from rmb_build.core.intervals import pooled_difference

    rng = np.random.default_rng(3)
    verdicts = set()
    for _ in range(200):
        shift = rng.uniform(-0.3, 0.3)
        parts = [
            (0.1, np.clip(rng.normal(shift, 0.8, rng.integers(1, 5)).round(), -1, 1), f"g{k % 2}") for k in range(10)
        ]
        r = pooled_difference(parts)
        assert (r["ci95"][0] > 0 or r["ci95"][1] < 0) == (r["p"] < 0.05) and r["ci95"][0] < r["ci95"][1]
        verdicts.add(r["p"] < 0.05)
    assert verdicts == {True, False}


@pytest.mark.parametrize("n", [5, 20, 50, 200])
def test_a_proportions_interval_holds_95_percent_on_average_over_accuracies(n):
    """Issue 47's band, computed exactly (binomial sums over accuracies 0.4-0.95, no draws): mid-p holds 93-97.5%
    on average and never under 92% at any accuracy of the grid; Clopper-Pearson, replaced, over-covers more."""
    from scipy.stats import binom

    from rmb_build.core.intervals import clopper_pearson, mid_p

    grid = np.linspace(0.4, 0.95, 111)

    def coverage(interval):
        ends = [interval(k, n) for k in range(n + 1)]
        return np.array([sum(binom.pmf(k, n, p) for k, (lo, hi) in enumerate(ends) if lo <= p <= hi) for p in grid])

    mid, exact = coverage(mid_p), coverage(clopper_pearson)
    assert 0.93 <= mid.mean() <= 0.975 and mid.min() >= 0.92
    assert exact.mean() > mid.mean() and exact.min() >= 0.95 - 1e-9  # CP's guarantee, paid for in width


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_a_macro_all_won_or_all_lost_has_the_interval_of_a_sure_figure_whatever_its_scenario_count(value):
    """1/k weights sum to 0.9999999999999998 for some k (14, 21, 22, ...): the estimate's spread was 2e-16, not 0,
    and Wilson's interval at an effective size of 1e-14 read [1.6e-14, 0.9999999999999998] for a macro all won
    (a reviewer's finding: macro accuracy and, since they share it, the style figures)."""
    from rmb_build.core.intervals import pooled_interval

    for k in range(2, 61):
        lo, hi = pooled_interval([(1 / k, np.full(3, value), "Helpfulness")] * k)
        if value == 1.0:
            assert hi == 1.0 and 0.5 < lo < 1.0, (k, lo, hi)
        else:
            assert lo == 0.0 and 0.0 < hi < 0.5, (k, lo, hi)


@pytest.mark.parametrize("scenarios", [2, 3, 4, 6, 12])
def test_a_macro_of_one_item_scenarios_holds_93_percent_at_every_accuracy(scenarios):
    """Every scenario one item, all of one accuracy (the least favourable truth: the wins are binomial), computed
    exactly over accuracies 0.4-0.95: pooled_interval alone held 88.4%, 91.8%, 87.5%, 92.3% and 93.5% at its
    least accuracy of this grid for 2, 3, 4, 6 and 12 scenarios; with the share's own mid-p interval held too, 94% or more."""
    ids = [f"Helpfulness/Task{i}/Scenario{i}" for i in range(scenarios)]
    ends = []
    for wins in range(scenarios + 1):
        outcomes = {s: np.array([1.0 if i < wins else 0.0]) for i, s in enumerate(ids)}
        ends.append(macro_interval(ids, outcomes))
    grid = np.linspace(0.4, 0.95, 111)
    held = [sum(binom.pmf(k, scenarios, p) for k, (lo, hi) in enumerate(ends) if lo <= p <= hi) for p in grid]
    assert min(held) >= 0.94, (min(held), grid[int(np.argmin(held))])


@pytest.mark.parametrize("goals", [("Helpfulness",), ("Helpfulness", "Harmlessness")])
@pytest.mark.parametrize("n", [2, 3, 6, 12])
def test_a_macro_of_one_item_scenarios_is_monotone_in_its_wins(n, goals):
    """One more win never lowers either end: pooled_interval and mid-p of the wins, joined, crossed (12 one-item
    scenarios: 11 wins had a lower end of 0.463, 10 wins 0.496; 2 wins an upper end below 1 win's)."""
    names = [f"{goals[i % len(goals)]}/S{i}" for i in range(n)]
    ends = [
        macro_interval(names, {s: np.array([1.0 if i < k else 0.0]) for i, s in enumerate(names)}) for k in range(n + 1)
    ]
    for k in range(n):
        assert ends[k + 1][0] >= ends[k][0] - 1e-12 and ends[k + 1][1] >= ends[k][1] - 1e-12, (k, ends[k], ends[k + 1])
    assert all(low < high for low, high in ends)


def test_a_tie_in_a_scenario_of_few_items_takes_the_few_item_floor_as_a_win_or_a_loss_does():
    """A reviewer's goal (200 items at 0.95, 30 at 0.9, 3 with ties counted half): the few-item floor applied to
    0/1 outcomes only, so [1, 1, 0.5] kept a variance of 0.11 and got [0.649, 0.975], narrower than [1, 1, 0]'s
    and with a lower end above it. Outcomes that are not 0 or 1 take the floor of the whole counts either side.
    (All won reads lower still, [0.417, 0.998]: Wilson's interval at an effective size near 1, docs/calibration.md
    "Found, not fixed".)"""
    from rmb_build.core.intervals import pooled_interval

    big = np.array([1.0] * 190 + [0.0] * 10)
    mid = np.array([1.0] * 27 + [0.0] * 3)

    def ends(small):
        return pooled_interval([(1 / 3, big, "g"), (1 / 3, mid, "g"), (1 / 3, np.array(small), "g")])

    tied, lost_one = ends([1.0, 1.0, 0.5]), ends([1.0, 1.0, 0.0])
    assert tied[1] - tied[0] >= 0.95 * (lost_one[1] - lost_one[0]), (tied, lost_one)
    assert lost_one[0] <= tied[0] + 1e-12 and lost_one[1] <= tied[1] + 1e-12, (tied, lost_one)
