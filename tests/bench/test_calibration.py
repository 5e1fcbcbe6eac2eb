"""The calibration suite (``bench/calibration.py``) on small draws: every check returns rows of one shape, a scorer
going by length alone reads 50 (refused where every chosen answer is the longer), a length-independent scorer's
length-neutral figure is its plain accuracy, and a module of further checks plugs in."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench_helpers import load_bench

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def calibration():
    return load_bench("calibration")


def test_every_check_returns_rows_of_the_contracted_shape(calibration, monkeypatch):
    monkeypatch.setattr(calibration, "MC_DRAWS", 20)
    monkeypatch.setattr(calibration, "TRUTH_RECORDS", 500)
    rows = calibration.run(2, 0, calibration.CHECKS)
    assert {r["estimator"].split(" (")[0] for r in rows} >= {
        "per-scenario accuracy",
        "ties-half accuracy",
        "macro accuracy",
        "micro accuracy",
        "rmb_overall",
        "length-neutral accuracy",
        "style hard",
        "style prefers_detailed",
        "style prefers_markdown",
    }
    for r in rows:
        assert set(calibration.ROW_KEYS) <= set(r) and r["draws"] == 2 and r["estimand"]
        assert r["coverage95"] is None or 0 <= r["coverage95"] <= 1
    assert "| estimator | case |" in calibration.table(rows, markdown=True)


@pytest.mark.parametrize("share", [0.6, 0.75, 0.9])
def test_a_length_only_scorer_reads_50_with_an_interval_covering_it(calibration, share):
    """On main's Firth fit: about 53 at 60% chosen-longer, 62 at 75%, 73 at 90%, 50 covered 0-40% of seeds."""
    row = calibration.length_check("longer wins", share, 360, 10, 0)
    assert row["mean_estimate"] == pytest.approx(0.5) and row["coverage95"] == 1.0 and row["refused"] == 0
    assert row["mean_width"] > 0.01


def test_every_chosen_answer_longer_is_refused(calibration):
    row = calibration.length_check("longer wins", 1.0, 360, 5, 0)
    assert row["refused"] == 1.0 and row["mean_estimate"] is None


def test_a_length_independent_scorer_reads_its_plain_accuracy(calibration):
    row = calibration.length_check("content 0.76", 0.75, 400, 30, 0)
    assert abs(row["mean_estimate"] - row["mean_plain"]) < 0.03 and abs(row["bias"]) < 0.02
    assert row["coverage95"] >= 0.8  # 30 draws: about 95% expected


def test_a_module_of_further_checks_is_run_where_it_exists(calibration, tmp_path, monkeypatch):
    extra = tmp_path / "calibration_uncertainty.py"
    extra.write_text(
        "def checks(draws, seed):\n"
        "    return [dict(estimator='x', estimand='y', case='z', draws=draws, truth=0.5, mean_estimate=0.5,\n"
        "                 bias=0.0, coverage95=0.95, mean_width=0.1)]\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(calibration, "__file__", str(tmp_path / "calibration.py"))
    (check,) = calibration.external_checks()
    rows = calibration.run(3, 0, [check])
    assert rows[0]["estimator"] == "x" and rows[0]["draws"] == 3 and not math.isnan(rows[0]["truth"])


def test_the_prefers_rows_are_drawn_from_a_known_preference(calibration, monkeypatch):
    """``prefers_*`` were set to 0.5 in every record and never checked; now each record's value is the share of its
    two answers whose variant one style step up won, drawn from ``style`` logits: a style-reading scorer's truth
    sits well above a style-blind one's 0.5."""
    monkeypatch.setattr(calibration, "MC_DRAWS", 20)
    monkeypatch.setattr(calibration, "TRUTH_RECORDS", 20_000)
    rows = {(r["estimator"].split(" (")[0], r["case"].split(",")[1].strip()): r for r in calibration.style_checks(2, 0)}
    for bias in ("prefers_detailed", "prefers_markdown"):
        assert abs(rows[f"style {bias}", "style-blind"]["truth"] - 0.5) < 0.01
        assert rows[f"style {bias}", "reads style (1 logit a step)"]["truth"] > 0.65
