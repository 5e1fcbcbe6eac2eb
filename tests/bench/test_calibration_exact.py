"""bench/calibration_exact.py: the exact coverage behind the calibration rows that sit outside 93-97%, and the
least coverage any interval could have there (issue 47's diagnostic rows)."""

from __future__ import annotations

import numpy as np
import pytest
from bench_helpers import load_bench
from scipy.stats import binom

from rmb_build.core.intervals import pooled_interval


@pytest.fixture(scope="module")
def exact():
    return load_bench("calibration_exact")


def test_no_interval_reaches_the_band_at_few_items_and_one_fixed_accuracy(exact):
    """At accuracy 0.95 a run of counts holds 77.4%, 97.7% or more of 5 items' law and 92.5%, 98.4% or more of
    20's: nothing between 93% and 97%; one item at 0.75 is held always or at most 75% of the time."""
    rows = {r["case"]: r for r in exact.fixed_accuracy_rows(sizes=(1, 5, 20), accuracies=(0.75, 0.95))}
    assert rows["n=5, accuracy 0.95"]["least_93"] == pytest.approx(1 - binom.cdf(3, 5, 0.95))
    assert rows["n=20, accuracy 0.95"]["least_93"] == pytest.approx(1 - binom.cdf(16, 20, 0.95))
    assert rows["n=1, accuracy 0.75"]["least_93"] == 1.0
    for case in ("n=5, accuracy 0.95", "n=20, accuracy 0.95", "n=1, accuracy 0.75"):
        assert rows[case]["least_93"] > 0.97 and rows[case]["mid_p"] >= rows[case]["least_93"] - 1e-12
    # where the band can be reached, the least is at or under it
    assert rows["n=20, accuracy 0.75"]["least_93"] <= 0.97


def test_least_is_the_smallest_run_reaching_the_bar(exact):
    here = np.array([0.1, 0.2, 0.3, 0.4])
    assert exact.least(here, here, 0.65) == pytest.approx(0.7)  # 0.3 + 0.4
    assert exact.least(here, here, 0.95) == pytest.approx(1.0)
    worst = np.array([0.25, 0.25, 0.25, 0.25])
    assert exact.least(here, worst, 0.5) == pytest.approx(0.3)  # counts 0-1: half of worst, 0.3 here


@pytest.mark.parametrize("sizes", [(37, 12, 37, 12), (3, 2)])
def test_the_vectorised_one_item_interval_is_pooled_interval(exact, sizes):
    rng = np.random.default_rng(5)
    counts = [[rng.integers(0, n + 1) for n in sizes] for _ in range(15)] + [[0] * len(sizes), list(sizes)]
    lo, hi = exact.overall_ends(np.array(counts), sizes)
    for j, ks in enumerate(counts):
        parts = [
            (1 / (len(sizes) * n), np.array([1.0 if i < k else 0.0]), f"cell{c}")
            for c, (n, k) in enumerate(zip(sizes, ks))
            for i in range(n)
        ]
        assert [lo[j], hi[j]] == pytest.approx(pooled_interval(parts), abs=1e-12), ks


def test_the_exact_coverage_of_a_goal_of_one_item_scenarios_is_what_draws_give(exact):
    """The goal cell of seed 0's release of one-item scenarios: the exact sum against 1,200 seeded draws."""
    (row,) = [r for r in exact.one_item_rows(0, releases=1) if r["case"].startswith("macro") and "seed 0" in r["case"]]
    theta = exact.one_item_release(0)[1]
    ends = exact.goal_ends(len(theta))
    rng = np.random.default_rng(11)
    wins = (rng.random((1200, len(theta))) < theta).sum(axis=1)
    held = np.mean([ends[k][0] <= theta.mean() <= ends[k][1] for k in wins])
    assert abs(held - row["toolkit"]) < 3 * np.sqrt(row["toolkit"] * (1 - row["toolkit"]) / 1200)
    assert 0.9 < row["least_93"] <= row["least_95"] <= row["toolkit"] + 1e-12
