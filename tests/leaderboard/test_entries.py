"""A leaderboard entry's figures are those of its predictions: an edited headline is refused, never ranked
(issue 48 item 10); names holding mathtext are drawn as text (item 8)."""

from __future__ import annotations

import json
import shutil

import pytest
from leaderboard_helpers import evaluate_all, small_release

from rmb_build.cli import main
from rmb_build.leaderboard.entries import load_entry


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("entries")
    return evaluate_all(small_release(tmp / "release"), tmp, ["baseline:length", "baseline:random"])


def _edited(folder, dest, edit):
    shutil.copytree(folder, dest)
    results = json.loads((dest / "results.json").read_text())
    edit(results)
    (dest / "results.json").write_text(json.dumps(results))
    return dest


@pytest.mark.parametrize(
    "field, value",
    [
        ("mean", 0.99),
        ("cells.pairwise/Helpfulness", 0.999),
        ("cells.bon/Harmlessness", 0.123456),
    ],
)
def test_an_edited_headline_is_refused_naming_the_figure(folders, tmp_path, capsys, field, value):
    """main ranked an edited 0.99 first; it is not what the predictions give."""

    def edit(r):
        *path, last = field.split(".")
        block = r["rmb_overall"]
        for key in path:
            block = block[key]
        block[last] = value

    edited = _edited(folders[1], tmp_path / "edited", edit)
    assert main(["leaderboard", str(folders[0]), str(edited), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"field 'rmb_overall.{field}'" in err[0] and "predictions.jsonl gives" in err[0], err


def test_an_edited_scenario_figure_or_count_is_refused(folders, tmp_path):
    from rmb_build.core.errors import InputError

    def edit(r):
        scenario = next(iter(r["pairwise"]["scenarios"]))
        r["pairwise"]["scenarios"][scenario]["n"] += 1

    with pytest.raises(InputError, match=r"field 'pairwise\.scenarios\..*\.n'"):
        load_entry(_edited(folders[0], tmp_path / "n", edit))

    def drop(r):
        r["bon"]["scenarios"].pop(next(iter(r["bon"]["scenarios"])))

    with pytest.raises(InputError, match=r"field 'bon\.scenarios\..*\.accuracy'"):
        load_entry(_edited(folders[0], tmp_path / "drop", drop))


def test_a_page_refuses_figures_it_cannot_check(folders, tmp_path, capsys):
    bare = tmp_path / "bare"
    shutil.copytree(folders[0], bare)
    (bare / "predictions.jsonl").unlink()
    assert main(["leaderboard", str(bare), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bare / "predictions.jsonl") in err[0], err


@pytest.mark.draws_heatmaps
@pytest.mark.parametrize("name", [r"hf:$\foo$", "baseline:$" + "{" * 300 + "}" * 300 + "$"])
def test_an_rm_spec_holding_mathtext_is_drawn_as_text(folders, tmp_path, name):
    """main stopped `rmb leaderboard` with ParseFatalException (RecursionError for the nested one)."""
    edited = _edited(folders[0], tmp_path / "named", lambda r: r.update(rm=name))
    assert main(["leaderboard", str(edited), "--out", str(tmp_path / "site"), "--resamples", "50"]) == 0
    assert list((tmp_path / "site" / "rm").rglob("heatmap.png"))


def test_results_written_under_an_earlier_interval_rule_are_shown_under_todays(folders, tmp_path):
    """A results.json whose ``intervals.method`` is not today's: its figures' intervals are recomputed from its
    predictions with the draws and seed it recorded (also where it lacks ``bootstrap``), and its style
    intervals, whose records the page does not read, are dropped rather than shown under the new rule's name."""
    from rmb_build.core.intervals import METHOD

    current = json.loads((folders[0] / "results.json").read_text())
    style_group = {"hard": 0.5, "n": 3, "ci95": {"hard": [0.1, 0.9]}, "few_item_scenarios": 2}

    def edit(results):
        results["intervals"] = {**results["intervals"], "method": "an earlier rule", "draws": 300, "seed": 3}
        results.pop("bootstrap", None)
        results["rmb_overall"]["ci95"]["mean"] = [0.0, 1.0]
        results["style"] = {"overall": style_group, "goals": {"Helpfulness": style_group}, "n_records": 3}

    entry = load_entry(_edited(folders[0], tmp_path / "old", edit))
    assert entry.results["intervals"]["method"] == METHOD
    assert (entry.results["intervals"]["draws"], entry.results["intervals"]["seed"]) == (300, 3)
    assert entry.ci95["mean"] == pytest.approx(current["rmb_overall"]["ci95"]["mean"])
    assert "ci95" not in entry.results["style"]["overall"] and entry.results["style"]["overall"]["hard"] == 0.5
    assert "ci95" not in entry.results["style"]["goals"]["Helpfulness"]
