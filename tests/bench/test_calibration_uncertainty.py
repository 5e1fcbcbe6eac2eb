"""bench/calibration_uncertainty.py on small draws: every estimator it checks gives rows of the contracted shape,
and on a release of tiny scenarios rmb_overall's interval covers the truth it draws from."""

from __future__ import annotations

import pytest
from bench_helpers import load_bench

FIELDS = {"estimator", "estimand", "case", "draws", "truth", "mean_estimate", "bias", "coverage95", "mean_width"}


@pytest.fixture(scope="module")
def calib():
    return load_bench("calibration_uncertainty")


def test_each_estimator_gives_rows_of_the_contracted_shape(calib):
    rows = [
        *calib.overall_rows(3, 0, sizes=(calib.TINY,)),
        *calib.compare_rows(2, 0, sizes=(calib.TINY,)),
        *calib.rank_rows(1, 0, sizes=(calib.TINY,)),
        *calib.downstream_rows(1, 0, rms=(8,)),
    ]
    assert all(set(r) == FIELDS for r in rows)
    assert {r["estimator"].split(" ")[0] for r in rows} >= {
        "rmb_overall",
        "macro",
        "compare",
        "rank",
        '"separated"',
        "downstream",
    }
    assert all(0 <= r["coverage95"] <= 1 and r["draws"] >= 1 and r["mean_width"] >= 0 for r in rows)
    assert all(abs(r["bias"] - (r["mean_estimate"] - r["truth"])) < 1e-12 for r in rows)
    assert "(see" not in calib.markdown(rows)  # a table, one row per line
    assert len(calib.markdown(rows).splitlines()) == len(rows) + 2


@pytest.mark.slow  # 40 draws of a 98-scenario release: over 4 s under load
def test_rmb_overall_on_tiny_scenarios_covers_its_truth(calib):
    (row, cell) = calib.overall_rows(40, 1, sizes=(calib.TINY,))[:2]
    assert row["coverage95"] >= 0.85 and abs(row["bias"]) < 0.02  # 40 draws: nominal 0.95, SD about 0.034
    assert 0.05 < row["mean_width"] < 0.3
