"""``rmb evaluate`` on a release with ``Style_set/``: RM-Bench's figures per scenario equal RM-Bench's own
``compute_accuracy`` on the same scores (strict ties), and the reader refuses a bad record in one line."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from formats_helpers import evaluate, evaluate_error
from style_helpers import SCENARIOS, style_records, write_style_file, write_style_release

from rmb_build.benchmarks.rmbench import LEVELS
from tests.benchmarks.test_authors import rmbench_compute_accuracy, rmbench_rule

TOL = 1e-9


def check_against(compute, tmp_path, seed: int) -> None:
    records = style_records(np.random.default_rng(seed))
    release = write_style_release(tmp_path / f"rel{seed}", records)
    for ties in ("strict", "half"):  # RM-Bench's rule whatever --ties says
        got = evaluate(tmp_path, release, "--ties", ties, out=f"out{seed}{ties}")["style"]
        for scenario in SCENARIOS:
            # compute_accuracy reads a domain only for its own four: each scenario's records go without one
            rows = [{k: r[k] for k in ("id", "score_chosen", "score_rejected")} for r in records[scenario]]
            want = compute(copy.deepcopy(rows))
            for level in LEVELS:
                assert got["scenarios"][scenario][level] == pytest.approx(float(want[f"{level}_acc"]), abs=TOL)
            assert got["scenarios"][scenario]["n"] == len(rows)
        goal = [s for s in SCENARIOS if s.startswith("Helpfulness/")]
        for level in LEVELS:
            mean = np.mean([got["scenarios"][s][level] for s in goal])
            assert got["goals"]["Helpfulness"][level] == pytest.approx(mean, abs=TOL)
            lo, hi = got["overall"]["ci95"][level]
            assert lo < got["overall"][level] < hi or got["overall"][level] in (0.0, 1.0)


def test_style_figures_equal_the_rule_of_compute_accuracy(tmp_path):
    for seed in (0, 1):
        check_against(rmbench_rule, tmp_path, seed)


def test_style_figures_equal_compute_accuracy_from_rm_benchs_repository(tmp_path):
    compute = rmbench_compute_accuracy()
    for seed in (0, 1, 2):
        check_against(compute, tmp_path, seed)


def test_style_bias_counts_the_detailed_and_markdown_variant_of_the_same_answer(tmp_path):
    records = style_records(np.random.default_rng(5))
    release = write_style_release(tmp_path / "rel", records)
    got = evaluate(tmp_path, release)
    rows = [json.loads(line) for line in (tmp_path / "out" / "style_predictions.jsonl").read_text().splitlines()]
    everything = [r for recs in records.values() for r in recs]
    detailed = [s[1] > s[0] for r in everything for s in (r["score_chosen"], r["score_rejected"])]
    markdown = [s[2] > s[1] for r in everything for s in (r["score_chosen"], r["score_rejected"])]
    assert np.mean([r["prefers_detailed"] for r in rows]) == pytest.approx(np.mean(detailed))
    overall = got["style"]["overall"]
    per = {
        s: np.mean([m for r, m in zip(everything, np.reshape(markdown, (-1, 2)).mean(1)) if r["scenario"] == s])
        for s in SCENARIOS
    }
    assert overall["prefers_markdown"] == pytest.approx(np.mean(list(per.values())))
    by_id = {r["id"]: r for r in everything}
    assert all(r["scores"]["chosen"] == by_id[r["id"]]["score_chosen"] for r in rows) and len(rows) == len(by_id)
    assert got["style"]["n_records"] == len(everything) and len(got["style"]["sha256"]) == 64
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Style-controlled accuracy (Style_set)" in report and "| Harmlessness/S6 |" in report
    assert f"| overall | {len(SCENARIOS)}" not in report  # n counts records, not scenarios


def test_a_release_without_style_set_has_no_style_figures(tmp_path):
    records = style_records(np.random.default_rng(0))
    release = write_style_release(tmp_path / "rel", records)
    import shutil

    shutil.rmtree(release / "Style_set")
    got = evaluate(tmp_path, release)
    assert "style" not in got and not (tmp_path / "out" / "style_predictions.jsonl").exists()


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r.update(chosen=r["chosen"][:2]), ["item 1 (id 1)", "chosen", "exactly 3 variants", "got 2"]),
        (lambda r: r.update(rejected="x"), ["rejected", "expected a list"]),
        (lambda r: r.pop("id"), ["item 1:", "'id'", "missing"]),
        (lambda r: r.update(scenario="Harmlessness/S1"), ["'scenario'", "differs from its file"]),
        (lambda r: r.update(conversation_input=[]), ["conversation_input", "empty conversation"]),
        (lambda r: r["chosen"].__setitem__(0, 3), ["chosen[0]", "expected a string"]),
        (lambda r: r.update(id="0"), ["'id'", "repeats the id of"]),
        # issue 48 item 10: main scored a record of no item without a word
        (lambda r: r.update(id="9999"), ["item 1 (id 9999)", "'id'", "no pairwise item has pair_uid '9999'"]),
        (lambda r: r.update(set="bon", loser=0), ["'id'", "no bon item has bon_uid '1'"]),
    ],
)
def test_a_bad_style_record_is_refused_in_one_line(tmp_path, capsys, change, words):
    records = style_records(np.random.default_rng(0))
    release = write_style_release(tmp_path / "rel", records)
    change(records[SCENARIOS[0]][1])
    write_style_file(release, SCENARIOS[0], records[SCENARIOS[0]])
    line = evaluate_error(tmp_path, release, capsys)
    assert "Style_set/Helpfulness/Chat/Discussion.json" in line
    for w in words:
        assert w in line, line


def test_a_bon_record_of_a_loser_its_item_lacks_is_refused(tmp_path, capsys):
    """Issue 48 item 10: a BoN style record naming loser_list[99] of a two-loser item was scored without a word."""
    from formats_helpers import ans

    from rmb_build.core.items import Answer, BonItem, Turn
    from rmb_build.release import write_release
    from rmb_build.release.read import Release

    records = style_records(np.random.default_rng(0))
    release = write_style_release(tmp_path / "rel", records)
    rel = Release(name="style-small", root=None)
    q = (Turn("user", "Which?"),)
    rel.add(
        BonItem(
            "0", q, Answer("m1", ans(3, "best")), (Answer("m2", ans(1, "a")), Answer("m3", ans(0, "b"))), SCENARIOS[0]
        )
    )
    write_release(rel, tmp_path / "bon")
    (release / "BoN_set").mkdir()
    (tmp_path / "bon" / "BoN_set" / "Helpfulness").rename(release / "BoN_set" / "Helpfulness")
    bon = {**copy.deepcopy(records[SCENARIOS[0]][0]), "id": "0", "set": "bon", "loser": 1}
    write_style_file(release, SCENARIOS[0], [*records[SCENARIOS[0]], bon])
    assert "bon" in evaluate(tmp_path, release)["style"]  # loser_list[1] exists: scored
    write_style_file(release, SCENARIOS[0], [*records[SCENARIOS[0]], {**bon, "loser": 99}])
    line = evaluate_error(tmp_path, release, capsys)
    assert "field 'loser'" in line and "bon item '0' has 2 losers, no loser_list[99]" in line, line


@pytest.mark.slow
def test_a_style_figures_interval_holds_about_95_percent_where_records_are_fractions():
    """A style-only scorer (chosen 3 logits per style step above rejected) on 3 scenarios of 30 records: each
    record's ``average`` is a fraction of 9 correlated cells, whose variance is far below ``p (1 - p)``. The
    adjusted-Wald interval (a whole 0 and 1 added to each scenario's records) held the truth in 99-100% of
    draws; the macro figures' pooled interval in about 95% (docs/calibration.md)."""
    from rmb_build.evaluate.style import _figures

    rng = np.random.default_rng(11)
    i, j = np.meshgrid(range(3), range(3), indexing="ij")

    def matrices(k: int) -> np.ndarray:
        return 1 / (1 + np.exp(-(rng.normal(0, 1.0, size=(k, 1, 1)) + 3.0 * (i - j))))

    truth = float(matrices(200_000).mean())
    scenarios = [f"Helpfulness/Task{k % 3}/Scenario{k % 3}" for k in range(90)]
    held, draws = 0, 200
    for d in range(draws):
        outcomes = (rng.random((90, 3, 3)) < matrices(90)).astype(float)
        rows = [
            {"scenario": s, "average": float(m.mean()), "hard": 0.5, "normal": 0.5, "easy": 0.5}
            | {"prefers_detailed": 0.5, "prefers_markdown": 0.5}
            for s, m in zip(scenarios, outcomes)
        ]
        lo, hi = _figures(rows, 1, d)["overall"]["ci95"]["average"]
        held += lo <= truth <= hi
    assert 0.92 <= held / draws <= 0.975, held


def test_a_style_group_pooling_scenarios_of_few_records_counts_them_and_the_report_marks_it():
    """Two scenarios of 3 records beside one of 30: the overall and goal rows count the two small ones (their
    intervals are conservative there) and report.md marks the row; a scenario row itself carries no count."""
    from rmb_build.evaluate.report_style import style_section
    from rmb_build.evaluate.style import _figures

    sizes = {
        "Helpfulness/Chat/Discussion": 30,
        "Helpfulness/Code/Documentation": 3,
        "Helpfulness/Code/Data Management": 3,
    }
    rows = [
        {"scenario": s, "average": (i % 4) / 4, "hard": 0.5, "normal": 0.5, "easy": 0.5}
        | {"prefers_detailed": float(i % 2), "prefers_markdown": 0.5}
        for s, n in sizes.items()
        for i in range(n)
    ]
    figures = _figures(rows, 1, 0)
    assert figures["overall"]["few_item_scenarios"] == 2
    assert figures["goals"]["Helpfulness"]["few_item_scenarios"] == 2
    assert figures["tasks"]["Helpfulness/Code"]["few_item_scenarios"] == 2
    assert "few_item_scenarios" not in figures["tasks"]["Helpfulness/Chat"]
    assert "few_item_scenarios" not in figures["scenarios"]["Helpfulness/Code/Documentation"]
    text = "\n".join(style_section({**figures, "n_records": len(rows)}))
    assert "| overall | 36 † |" in text and "| Helpfulness/Chat | 30 |" in text
