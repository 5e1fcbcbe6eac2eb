"""Best-of-k arithmetic against brute force: every k-subset enumerated, ties broken uniformly, in fractions."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from rmb_build.analysis.downstream.best_of_k import (
    correlate,
    expected_pick,
    ks_for,
    oracle_agreement,
    permutation_p,
    summarize,
)


def brute_force(scores, grades, k):
    """The mean over every k-subset of the mean grade of the subset's top-scoring samples."""
    total, count = Fraction(0), 0
    for subset in itertools.combinations(range(len(scores)), k):
        top = max(scores[i] for i in subset)
        picked = [grades[i] for i in subset if scores[i] == top]
        total += Fraction(sum(picked), len(picked))
        count += 1
    return total / count


@pytest.mark.parametrize("seed", range(30))
def test_exact_best_of_k_matches_enumeration_with_ties(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    scores = [rng.choice([0, 1, 2, 2.5]) for _ in range(n)]  # few distinct values: many ties
    grades = [rng.randint(1, 10) for _ in range(n)]
    for k in range(1, n + 1):
        expected = brute_force(scores, grades, k)
        assert expected_pick(scores, grades, k, exact=True) == expected
        assert expected_pick(scores, grades, k) == pytest.approx(float(expected), abs=1e-12)


def test_bounds_random_and_oracle():
    scores, grades = [3, 1, 2, 2], [1, 9, 5, 7]
    assert expected_pick(scores, grades, 1, exact=True) == Fraction(22, 4)  # a random pick: the mean grade
    assert expected_pick(grades, grades, 4) == 9  # the oracle picks the best grade
    assert expected_pick(scores, grades, 4) == 1  # this RM's top score is the worst answer
    assert ks_for(16) == [1, 2, 4, 8, 16] and ks_for(6) == [1, 2, 4, 6] and ks_for(1) == [1]
    assert oracle_agreement([2, 2, 1], [9, 3, 9]) == 0.5


def test_summary_interval_and_curve():
    rng = np.random.default_rng(0)
    grades = rng.integers(1, 11, size=(40, 8)).tolist()
    s = summarize(grades, grades, resamples=500)  # the oracle
    assert s["best_of_k"]["8"] == pytest.approx(np.max(grades, axis=1).mean())
    assert s["best_of_k"]["1"] == pytest.approx(np.mean(grades))
    lo, hi = s["ci95"]
    assert lo < s["score"] < hi
    values = list(s["best_of_k"].values())
    assert values == sorted(values)  # the oracle's curve rises with k
    flat = summarize([[1, 2]] * 5, [[4, 4]] * 5, resamples=200)
    assert flat["ci95"] is None  # every prompt the same: no zero-width interval
    lo, hi = summarize([[1, 2]] * 5, [[10, 10]] * 5, resamples=200, scale=(1, 10))["ci95"]
    assert lo < 10 and hi == 10  # with the grades' scale known: the Clopper-Pearson interval of the mean


def test_correlations_small_and_large():
    x = np.array([0.9, 0.5, 0.1])
    per_prompt = np.array([[8.0, 9.0], [5.0, 6.0], [2.0, 3.0]])
    c = correlate(x, per_prompt)
    assert c["n_rms"] == 3
    assert c["spearman"]["value"] == pytest.approx(1.0) and c["kendall"]["value"] == pytest.approx(1.0)
    assert c["spearman"]["p_value"] == pytest.approx(2 / 6)  # the two orderings as extreme, of 3!
    assert c["spearman"]["ci95"] is None
    few = correlate(x[:2], per_prompt[:2])
    assert few["spearman"]["value"] is None and "at least 3" in few["note"]

    rng = np.random.default_rng(1)
    fig = rng.random(9)
    pp = fig[:, None] * 5 + rng.normal(0, 1, size=(9, 30))
    big = correlate(fig, pp, resamples=300)
    ref = pp.mean(axis=1)
    assert big["pearson"]["value"] == pytest.approx(stats.pearsonr(fig, ref)[0])
    assert big["spearman"]["value"] == pytest.approx(stats.spearmanr(fig, ref)[0])
    assert big["kendall"]["value"] == pytest.approx(stats.kendalltau(fig, ref)[0])
    lo, hi = big["pearson"]["ci95"]
    assert lo < big["pearson"]["value"] < hi and big["pearson"]["p_value"] is None


def test_permutation_p_matches_scipy_exact():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    y = np.array([2.0, 1.0, 4.0, 3.0, 6.0, 5.0])
    from rmb_build.analysis.downstream.best_of_k import STATISTICS

    p = permutation_p(x, y, STATISTICS["kendall"])
    assert p == pytest.approx(stats.kendalltau(x, y, method="exact").pvalue)


def test_no_sliver_of_an_interval_when_every_draw_misses_the_observed_value():
    from rmb_build.analysis.downstream.best_of_k import bias_corrected_interval

    draws = np.linspace(0.90, 0.95, 500)
    assert bias_corrected_interval(draws, 0.99) is None  # all below: the bootstrap cannot place 0.99
    lo, hi = bias_corrected_interval(draws, 0.93)
    assert lo < 0.93 < hi
