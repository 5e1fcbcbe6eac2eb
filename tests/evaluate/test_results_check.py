"""Every results folder is read like a pushed one: a figure a page or plot reads that is not of its type and range
stops ``rmb leaderboard`` and ``rmb push-results`` in one line naming the file and the field (issue 48 item 8)."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from leaderboard_helpers import evaluate_all, small_release

from rmb_build.cli import main
from rmb_build.core.errors import InputError

BAD = {
    "string-nan": "nan",
    "string-number": "0.5",
    "boolean": True,
    "list": [0.5],
    "nan": math.nan,
    "huge": 1e308,
    "negative": -5,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results-check")
    [out] = evaluate_all(small_release(tmp / "release"), tmp, ["baseline:length"])
    return out


def _spoiled(folder, tmp_path, field: str, value) -> tuple:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    results = json.loads((copy / "results.json").read_text())
    *path, last = field.split(".")
    block = results
    for key in path:
        block = block[key]
    block[last] = value
    (copy / "results.json").write_text(json.dumps(results))  # json writes NaN as NaN, as Python's json reads it
    return copy, results


FIELDS = [
    "rmb_overall.mean",
    "rmb_overall.cells.pairwise/Harmlessness",
    "pairwise.goals.Helpfulness.macro",
    "bon.overall.micro",
    "bias.length.chosen_longer.accuracy",
]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_figure_of_the_wrong_type_or_range_is_one_line_naming_file_and_field(folder, tmp_path, capsys, field, bad):
    copy, _ = _spoiled(folder, tmp_path, field, BAD[bad])
    assert main(["leaderboard", str(copy), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(copy / "results.json") in err[0] and f"field '{field}'" in err[0], err
    assert not (tmp_path / "site" / "index.html").exists()


def test_a_scenarios_accuracy_or_count_is_checked_where_the_heatmap_reads_it(folder, tmp_path, capsys):
    results = json.loads((folder / "results.json").read_text())
    scenario = next(iter(results["pairwise"]["scenarios"]))
    for key, value in (("accuracy", "0.5"), ("accuracy", None), ("n", 2.5), ("n", -1), ("ci95", [0.9, 0.1])):
        copy, _ = _spoiled(folder, tmp_path / key / str(value), f"pairwise.scenarios.{scenario}.{key}", value)
        assert main(["push-results", str(copy), "--repo-id", "me/x", "--dry-run", "--out", str(tmp_path / "hf")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"field 'pairwise.scenarios.{scenario}.{key}" in err[0], err


@pytest.mark.parametrize("value", ['3" onmouseover="alert(1)', "abc", 2.5, -1, [1]])
def test_a_count_of_few_item_scenarios_that_is_not_one_is_refused_before_a_page_shows_it(
    folder, tmp_path, capsys, value
):
    """The leaderboard draws ``few_item_scenarios`` into a title attribute: a reviewer's pushed file carried an
    onmouseover there, and a string crashed the page's build with a traceback."""
    field = "rmb_overall.few_item_scenarios.mean"
    copy, _ = _spoiled(folder, tmp_path, field, value)
    assert main(["leaderboard", str(copy), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"field '{field}'" in err[0], err
    copy, _ = _spoiled(folder, tmp_path / "whole", "rmb_overall.few_item_scenarios", value)
    assert main(["leaderboard", str(copy), "--out", str(tmp_path / "site")]) == 2
    assert "few_item_scenarios" in capsys.readouterr().err
    copy, _ = _spoiled(folder, tmp_path / "goal", "pairwise.goals.Helpfulness.few_item_scenarios", value)
    assert main(["leaderboard", str(copy), "--out", str(tmp_path / "site")]) == 2
    assert "pairwise.goals.Helpfulness.few_item_scenarios" in capsys.readouterr().err
    assert not (tmp_path / "site" / "index.html").exists()


def test_the_figures_evaluate_writes_pass():
    from rmb_build.evaluate.results_check import check_figures

    check_figures({"rm": "x", "pairwise": {}, "bon": {}}, "r.json")  # an older, sparser file: nothing required
    with pytest.raises(InputError, match="field 'rm'"):
        check_figures({"rm": ["x"], "pairwise": {}, "bon": {}}, "r.json")


@pytest.mark.parametrize("value", [0, 10**9])
@pytest.mark.parametrize("field", ["intervals.draws", "bootstrap.resamples"])
def test_a_recorded_count_of_draws_a_page_cannot_redraw_with_is_one_line(folder, tmp_path, capsys, field, value):
    """A page redraws a file's intervals with its recorded draws (where they are of an earlier rule): 0 ended in
    a traceback, 10^9 would fill the memory."""
    copy, _ = _spoiled(folder, tmp_path, field, value)
    assert main(["leaderboard", str(copy), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"field '{field}'" in err[0], err
