"""Length-controlled accuracy (results.json ``length_control``): the length-balanced figure reads 50 for a
scorer going by length alone at any chosen-longer share (refused where every chosen answer is the longer), a
length-independent scorer's plain accuracy, and a mixed scorer's balanced expectation; equal-length pairs move it
by their weight only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rmb_build.cli import main
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.evaluate.length_control import group_figures, length_neutral
from rmb_build.release import write_release
from rmb_build.release.read import Release

CONTENT_SKILL = 0.8  # P(content prefers chosen) of the mixed scorer below
TAU = 20.0  # characters worth one unit of content score

MIXED = f"""
def score(conversation, answer):
    content = float(answer.split("|", 1)[0])
    return content + len(answer) / {TAU}
"""


def run(release: Path, rm: str, out: Path, draws: str = "400") -> dict:
    args = ["evaluate", "--release", str(release), "--rm", rm, "--out", str(out)]
    assert main([*args, "--cache", str(out.parent / "cache"), "--no-progress", "--bootstrap", draws]) == 0
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def mixed_release(root: Path, n: int = 400) -> tuple[Path, np.ndarray, np.ndarray]:
    """Pairs whose content difference (written in the chosen answer) is Logistic(logit 0.8, 1) and whose chosen
    answer is mostly longer: the mixed scorer wins a pair with probability expit(logit 0.8 + diff / TAU).
    Returns the release, each pair's length difference and its probability of a win."""
    rng = np.random.default_rng(42)
    mu = np.log(CONTENT_SKILL / (1 - CONTENT_SKILL))
    rel = Release(name="mixed", root=None)
    diffs, probs = [], []
    for i in range(n):
        d = rng.logistic(mu, 1.0)
        diff = int(rng.normal(150, 150))
        chosen_head, rejected_head = f"{d:+.6f}|", "+0.000000|"
        base = 500
        chosen = chosen_head + "c" * (base + diff - len(chosen_head))
        rejected = rejected_head + "r" * (base - len(rejected_head))
        diffs.append(len(chosen) - len(rejected))
        probs.append(1 / (1 + np.exp(-(mu + diffs[-1] / TAU))))
        q = (Turn("user", f"Question {i}?", "en"),)
        rel.add(PairwiseItem(str(i), q, Answer("a", chosen), Answer("b", rejected), "Helpfulness/Chat/Discussion"))
    write_release(rel, root)
    return root, np.array(diffs, dtype=float), np.array(probs)


def test_a_content_and_length_scorer_reads_its_length_balanced_expectation(tmp_path):
    """The estimand computed from the pairs' known win probabilities (the estimator is linear in the outcomes)
    lies in the interval; the plain accuracy, inflated by length, lies far above it."""
    release, diffs, probs = mixed_release(tmp_path / "rel")
    scorer = tmp_path / "mixed.py"
    scorer.write_text(MIXED, encoding="utf-8")
    got = run(release, f"python:{scorer}:score", tmp_path / "out")["length_control"]
    g = got["goals"]["Helpfulness"]
    truth = length_neutral(diffs, probs)["length_neutral"]
    assert "characters" in got["unit"] and "length-balanced" in got["estimator"]
    assert g["accuracy"] > 0.85 and g["ci95"][0] > CONTENT_SKILL  # length inflates the plain accuracy
    lo, hi = g["length_neutral_ci95"]
    assert lo < truth < hi and abs(g["length_neutral"] - truth) < 0.05 and hi < g["ci95"][0]
    assert sum(b["n"] for b in g["bins"]) == g["n"] == 400
    assert got["overall"]["length_neutral"] == g["length_neutral"]  # one goal: the same pairs
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Length-controlled accuracy (pairwise)" in report and "characters" in report


@pytest.mark.slow
def test_baseline_length_is_at_chance_on_the_sample(rmb_sample, tmp_path):
    got = run(rmb_sample, "baseline:length", tmp_path / "out")
    plain = got["pairwise"]["goals"]["Helpfulness"]
    assert round(100 * plain["macro"], 1) == 61.1 and plain["ci95_macro"][0] > 0.5  # 61.1 [55.7, 66.3]
    for goal, g in got["length_control"]["goals"].items():
        lo, hi = g["length_neutral_ci95"]
        assert lo < 0.5 < hi and abs(g["length_neutral"] - 0.5) < 0.005, goal  # 2 equal-length pairs at most
    g = got["length_control"]["goals"]["Helpfulness"]
    assert g["ci95"][0] > 0.5  # its plain accuracy over the pairs excludes chance as well
    # a length-only scorer wins every pair whose chosen answer is longer, loses every other
    for b in g["bins"]:
        if b["n"] and b["range"][0] is not None and b["range"][0] >= 1:
            assert b["accuracy"] == 1.0
        elif b["n"]:
            assert b["accuracy"] == 0.0


def chosen_longer(rng: np.random.Generator, n: int, share: float) -> np.ndarray:
    """Length differences with a ``share`` chosen-longer, the chosen-longer gaps larger (a length-preferring
    judge's release)."""
    sign = np.where(rng.random(n) < share, 1.0, -1.0)
    return sign * np.ceil(np.exp(rng.normal(np.where(sign > 0, np.log(250), np.log(120)), 1.0)))


@pytest.mark.parametrize("share", [0.6, 0.75, 0.9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_length_only_scorer_reads_50_whatever_the_chosen_longer_share(share, seed):
    """On main the Firth fit read 53 at 60%, 62 at 75%, 73 at 90% chosen-longer: the penalty decided."""
    x = chosen_longer(np.random.default_rng([seed, int(share * 100)]), 360, share)
    for y in ((x > 0).astype(float), (x < 0).astype(float)):  # the longer wins; the shorter wins
        f = group_figures(x, y, 400, seed, "t")
        lo, hi = f["length_neutral_ci95"]
        assert f["length_neutral"] == pytest.approx(0.5) and lo < 0.5 < hi and hi - lo > 0.01
        assert f["accuracy"] == pytest.approx(share if y[x > 0].all() else 1 - share, abs=0.1)


def test_every_chosen_answer_longer_is_refused_with_why():
    """Where no chosen answer is the shorter, a length-only scorer and a perfect one give the same outcomes:
    on main the fit read 64.2 [36.9, 84.7] with no caveat. No point figure; the interval is the identification
    bound over any accuracy on the missing side, which holds 50 for a length-only scorer."""
    x = chosen_longer(np.random.default_rng(3), 400, 1.0)
    f = group_figures(x, (x > 0).astype(float), 400, 0, "t")
    assert f["length_neutral"] is None and f["length_neutral_bound"] is True
    assert "every pair of unequal lengths has the chosen answer longer" in f["length_neutral_reason"]
    lo, hi = f["length_neutral_ci95"]
    assert lo <= 0.5 <= hi and 0.45 < lo and hi == 1.0
    assert f["accuracy"] == 1.0
    # a scorer at chance on those pairs: the bound runs from about 25 to about 75
    y = (np.random.default_rng(4).random(len(x)) < 0.5).astype(float)
    lo, hi = group_figures(x, y, 400, 0, "t")["length_neutral_ci95"]
    assert 0.15 < lo < 0.3 and 0.7 < hi < 0.85


@pytest.mark.parametrize("share", [0.5, 0.75, 0.9])
def test_a_length_independent_scorer_reads_its_plain_accuracy(share):
    """Over 20 seeded releases of 400 pairs, each won with probability 0.76 whatever the lengths: the figures
    agree with the plain accuracy on average (a draw's own gap is noise: the rarer side's pairs are few at 90%)
    and the intervals hold 0.76 about 19 times in 20."""
    neutral, plain, covered = [], [], 0
    for seed in range(20):
        rng = np.random.default_rng([7, seed, int(share * 100)])
        x = chosen_longer(rng, 400, share)
        f = group_figures(x, (rng.random(400) < 0.76).astype(float), 400, 0, "t")
        neutral.append(f["length_neutral"])
        plain.append(f["accuracy"])
        covered += f["length_neutral_ci95"][0] <= 0.76 <= f["length_neutral_ci95"][1]
    assert abs(np.mean(neutral) - np.mean(plain)) < 0.01 and abs(np.mean(neutral) - 0.76) < 0.02
    assert np.median(np.abs(np.subtract(neutral, plain))) < 0.03 and covered >= 17


def test_two_equal_length_pairs_move_the_figure_by_their_weight_only():
    """The official sample's Harmlessness (819 pairs, 2 of equal length) read 22.6 strict and 46.5 half on
    main: the fit was read at exactly d = 0. Equal-length pairs are now one stratum weighted by their count."""
    x = np.concatenate([chosen_longer(np.random.default_rng(5), 817, 0.6), [0.0, 0.0]])
    strict = group_figures(x, (x > 0).astype(float), 400, 0, "t")
    half = group_figures(x, np.where(x == 0, 0.5, (x > 0).astype(float)), 400, 0, "t")
    assert strict["equal_length_pairs"] == 2
    assert half["length_neutral"] - strict["length_neutral"] == pytest.approx(0.5 * 2 / 819)
    for f in (strict, half):
        lo, hi = f["length_neutral_ci95"]
        assert abs(f["length_neutral"] - 0.5) < 0.002 and lo < 0.5 < hi


def test_every_pair_of_equal_length_reads_the_plain_accuracy():
    y = np.array([1.0, 0.0, 1.0, 1.0] * 5)
    f = group_figures(np.zeros(20), y, 100, 0, "t")
    assert f["length_neutral"] == pytest.approx(0.75) and f["length_strata"] == 0


def test_too_few_pairs_give_no_figure():
    x = np.array([1.0, -1.0] * 4)
    f = group_figures(x, (x > 0).astype(float), 50, 0, "t")
    assert (
        f["length_neutral"] is None and f["length_neutral_ci95"] is None and "fewer than" in f["length_neutral_reason"]
    )
    assert f["accuracy"] == float((x > 0).mean())


def test_the_length_neutral_interval_needs_no_resampling():
    """The interval is computed, not resampled: the same for 1 draw as for 2000. On main each of the bootstrap's
    draws was a penalised fit (115 s of a cached evaluate of the official release; bench/evaluate_cached.py
    measures the cost now)."""
    rng = np.random.default_rng(11)
    x = chosen_longer(rng, 400, 0.7)
    y = (rng.random(400) < 0.7).astype(float)
    one, many = group_figures(x, y, 1, 0, "t"), group_figures(x, y, 2000, 0, "t")
    assert one["length_neutral"] == many["length_neutral"]
    assert one["length_neutral_ci95"] == many["length_neutral_ci95"] and "bootstrap" not in many
