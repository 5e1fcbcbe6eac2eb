"""Length-controlled accuracy (results.json ``length_control``): a length-only scorer is near chance at zero
length difference, a scorer mixing content and length has its content skill recovered, and the estimate exists
where length separates the outcomes perfectly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from rmb_build.cli import main
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.evaluate.length_control import firth_logistic, group_figures
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


def mixed_release(root: Path, n: int = 400) -> Path:
    """Pairs whose content difference (written in the chosen answer) is Logistic(logit 0.8, 1) and whose chosen
    answer is mostly longer: the mixed scorer wins a pair with probability expit(logit 0.8 + diff / TAU)."""
    rng = np.random.default_rng(42)
    mu = np.log(CONTENT_SKILL / (1 - CONTENT_SKILL))
    rel = Release(name="mixed", root=None)
    for i in range(n):
        d = rng.logistic(mu, 1.0)
        diff = int(rng.normal(150, 150))
        chosen_head, rejected_head = f"{d:+.6f}|", "+0.000000|"
        base = 500
        chosen = chosen_head + "c" * (base + diff - len(chosen_head))
        rejected = rejected_head + "r" * (base - len(rejected_head))
        q = (Turn("user", f"Question {i}?", "en"),)
        rel.add(PairwiseItem(str(i), q, Answer("a", chosen), Answer("b", rejected), "Helpfulness/Chat/Discussion"))
    write_release(rel, root)
    return root


def test_a_content_and_length_scorer_has_its_content_skill_recovered(tmp_path):
    release = mixed_release(tmp_path / "rel")
    scorer = tmp_path / "mixed.py"
    scorer.write_text(MIXED, encoding="utf-8")
    got = run(release, f"python:{scorer}:score", tmp_path / "out")["length_control"]
    g = got["goals"]["Helpfulness"]
    assert "characters" in got["unit"] and "Firth" in got["estimator"]
    assert g["accuracy"] > 0.85 and g["ci95"][0] > CONTENT_SKILL  # length inflates the plain accuracy
    lo, hi = g["length_neutral_ci95"]
    assert lo < CONTENT_SKILL < hi and abs(g["length_neutral"] - CONTENT_SKILL) < 0.05
    assert sum(b["n"] for b in g["bins"]) == g["n"] == 400
    assert got["overall"]["length_neutral"] == g["length_neutral"]  # one goal: the same pairs
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Length-controlled accuracy (pairwise)" in report and "characters" in report


@pytest.mark.slow
def test_baseline_length_is_near_chance_at_zero_length_difference_on_the_sample(rmb_sample, tmp_path):
    got = run(rmb_sample, "baseline:length", tmp_path / "out")
    plain = got["pairwise"]["goals"]["Helpfulness"]
    assert round(100 * plain["macro"], 1) == 61.1 and plain["ci95_macro"][0] > 0.5  # 61.1 [55.7, 66.3]
    g = got["length_control"]["goals"]["Helpfulness"]
    assert g["ci95"][0] > 0.5  # its plain accuracy over the pairs excludes chance as well
    lo, hi = g["length_neutral_ci95"]
    assert lo < 0.5 < hi and abs(g["length_neutral"] - 0.5) < 0.05
    # a length-only scorer wins every pair whose chosen answer is longer, loses every other
    for b in g["bins"]:
        if b["n"] and b["range"][0] is not None and b["range"][0] >= 1:
            assert b["accuracy"] == 1.0
        elif b["n"]:
            assert b["accuracy"] == 0.0


def test_the_estimate_exists_where_length_separates_the_outcomes_perfectly():
    x = np.array([-300.0, -40, -7, -2, 2, 7, 40, 300] * 3)  # symmetric: the fit at 0 is 1/2 exactly
    y = (x > 0).astype(float)
    b0, b1, ok = firth_logistic(np.sign(x) * np.log1p(np.abs(x)), y, np.ones((1, len(x))))
    assert ok[0] and np.isfinite(b0[0]) and np.isfinite(b1[0])  # plain maximum likelihood has no finite fit here
    f = group_figures(x, y, 300, 0, "t")
    assert f["length_neutral"] == pytest.approx(expit(b0[0])) == pytest.approx(0.5, abs=1e-6)
    assert f["length_neutral_ci95"][0] < 0.5 < f["length_neutral_ci95"][1]


@pytest.mark.parametrize(
    "x, reason",
    [(np.array([5.0] * 20), "same length difference"), (np.array([1.0, -1.0] * 4), "fewer than 10")],
)
def test_no_length_neutral_figure_where_the_data_cannot_give_one(x, reason):
    f = group_figures(x, (x > 0).astype(float), 50, 0, "t")
    assert f["length_neutral"] is None and f["length_neutral_ci95"] is None and reason in f["length_neutral_reason"]
    assert f["accuracy"] == float((x > 0).mean())


def test_a_resample_whose_pairs_are_all_alike_is_no_fit_and_never_nan():
    """A bootstrap resample that draws one pair only has a singular information matrix: its Newton step was
    infinite and the fit became NaN, which reached results.json (refused there by the strict writer)."""
    import numpy as np

    from rmb_build.evaluate.length_control import firth_logistic, group_figures

    x = np.array([-3.0, -1.0, 0.5, 2.0, 4.0] * 3)
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0] * 3)
    one_pair = np.zeros((1, len(x)))
    one_pair[0, 2] = len(x)  # every draw the same pair
    b0, b1, ok = firth_logistic(x, y, np.vstack([one_pair, np.ones((1, len(x)))]))
    assert np.isfinite(b0).all() and np.isfinite(b1).all()
    assert ok.tolist() == [False, True]
    fig = group_figures(x, y, 200, 0, "t")
    assert fig["length_neutral_ci95"] is None or all(np.isfinite(fig["length_neutral_ci95"]))


def test_a_length_only_scorers_equal_length_ties_count_as_the_ties_rule_says():
    """Read at exactly zero difference, the figure is where a length-only scorer ties: under strict ties its
    equal-length pairs count wrong and pull it below 50; under half ties it sits at chance. The shape of the
    450-pair built release in bench/README.md (many small differences, 3 equal-length pairs)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.integers(1, 900, 236), rng.integers(1, 900, 211), np.zeros(3)]).astype(float)
    strict = group_figures(x, (x > 0).astype(float), 400, 0, "t")
    half = group_figures(x, np.where(x == 0, 0.5, (x > 0).astype(float)), 400, 0, "t")
    assert strict["length_neutral"] < half["length_neutral"] - 0.1
    lo, hi = half["length_neutral_ci95"]
    assert lo < 0.5 < hi
