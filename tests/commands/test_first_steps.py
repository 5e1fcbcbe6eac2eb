"""What a newcomer meets first: each mistake of a first session answered in one line that says what to do
instead (a set folder given as the release, a misspelt option, a bad ``--rm``, a misspelt scores field),
no file of a built release reported as skipped, and a headline whose protocol note reads as one rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from leaderboard_helpers import small_release

from rmb_build.cli import main


def _error(capsys, *argv: str) -> str:
    """The one line a refused command prints (exit 2)."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own exit
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err.strip()


@pytest.fixture
def release(tmp_path) -> Path:
    return small_release(tmp_path / "demo")


@pytest.mark.parametrize("command", ["evaluate", "audit"])
def test_a_set_folder_given_as_the_release_names_the_release_folder_above_it(
    command, release, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    argv = {
        "evaluate": ["evaluate", "--release", "demo/Pairwise_set", "--rm", "baseline:length", "--out", "out"],
        "audit": ["audit", "demo/Pairwise_set/Harmlessness"],
    }[command]
    line = _error(capsys, *argv)
    assert "a set folder of a release, not a release: pass the release folder above it, demo" in line, line
    assert not (tmp_path / "out").exists()


def test_a_misspelt_option_is_named_with_its_closest_option_not_the_usage_block(capsys):
    line = _error(capsys, "evaluate", "--relase", "rmb", "--rm", "baseline:length", "--out", "out")
    assert (
        line
        == "rmb evaluate: error: unknown option --relase (did you mean --release?) (rmb evaluate --help lists the options)"
    )
    line = _error(capsys, "audit", "rel", "--jsno", "a.json")
    assert "unknown option --jsno (did you mean --json?)" in line and "usage:" not in line, line


def test_an_option_with_nothing_close_and_a_missing_one_are_one_line_too(capsys):
    assert "unknown option --zzz" in _error(capsys, "models", "--zzz")
    line = _error(capsys, "evaluate", "--rm", "baseline:length", "--out", "out")
    assert line.startswith("rmb evaluate: error: the following arguments are required: --release"), line


@pytest.mark.parametrize(
    "spec, said",
    [
        ("length", "expected KIND:TARGET"),
        ("baseline:lenght", "unknown baseline"),
        ("hff:model", "unknown RM kind 'hff'"),
        ("hf:./no/such/model", "no such folder"),
    ],
)
def test_a_bad_rm_is_refused_before_the_release_is_read(release, tmp_path, capsys, spec, said):
    (release / "Pairwise_set" / "Harmlessness" / "S1.json").write_text("[{")  # reading the release would fail
    line = _error(capsys, "evaluate", "--release", str(release), "--rm", spec, "--out", str(tmp_path / "out"))
    assert said in line, line


@pytest.mark.slow  # over 4 s of its own under load (3-6 s of CPU)
def test_evaluate_and_audit_do_not_list_a_built_releases_own_files_as_skipped(release, tmp_path, capsys):
    (release / "audit.json").write_text("{}")  # what a build writes beside manifest.json
    (release / "notes.txt").write_text("mine")  # a stranger's file is still listed
    assert main(["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(tmp_path / "e")]) == 0
    said = capsys.readouterr().out
    assert "notes.txt" in said and "audit.json" not in said, said
    assert main(["audit", str(release), "--json", str(tmp_path / "a.json")]) in (0, 1)
    listed = json.dumps(json.loads((tmp_path / "a.json").read_text()))
    assert "notes.txt" in listed and "audit.json" not in listed


def test_the_headline_says_which_tie_rule_counts_without_contradicting_itself(release, tmp_path, capsys):
    argv = ["evaluate", "--release", str(release), "--rm", "baseline:length", "--protocol", "rewardbench"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--ties", "half"]) == 0
    headlines = [ln for ln in capsys.readouterr().out.splitlines() if "overall" in ln]
    assert headlines and all(
        ln.endswith(
            "[protocol rewardbench (sets only the tie rule for this RM), ties half (--ties, over the protocol's strict)]"
        )
        for ln in headlines
    ), headlines
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert "[protocol rewardbench (sets only the tie rule for this RM), ties strict]" in capsys.readouterr().out


def test_a_scores_row_with_a_misspelt_field_names_the_field_it_lacks(release, tmp_path, capsys):
    scores = tmp_path / "scores.jsonl"
    scores.write_text(json.dumps({"set": "pairwise", "uid": "0", "chosen": 1.0, "rejcted": 0.5}) + "\n")
    line = _error(capsys, "evaluate", "--release", str(release), "--scores", str(scores), "--out", str(tmp_path / "o"))
    assert f"{scores}: line 1: field 'rejected': missing (the row has 'rejcted': misspelt?)" in line, line


def test_rmb_results_row_with_a_misspelt_reward_names_it(release, tmp_path, capsys):
    scores = tmp_path / "result.json"
    row = {"pair_uid": "0", "category_path": "Pairwise_set/Harmlessness/S1", "chosen_reward": 1.0, "reject_rewrd": 0}
    scores.write_text(json.dumps([row]))
    line = _error(capsys, "evaluate", "--release", str(release), "--scores", str(scores), "--out", str(tmp_path / "o"))
    assert "field 'reject_reward': missing (the row has 'reject_rewrd': misspelt?)" in line, line


@pytest.mark.torch
def test_a_release_folder_itself_is_read_as_before(release, tmp_path):
    shutil.copytree(release, tmp_path / "RMB_dataset")
    assert main(["audit", str(tmp_path / "RMB_dataset"), "--json", str(tmp_path / "a.json")]) in (0, 1)
