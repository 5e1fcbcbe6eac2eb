"""``rmb push-results``: an evaluation as a Hugging Face dataset that ``datasets`` loads and ``rmb leaderboard``
ranks exactly as it ranks the evaluation folders it was made from (issue 41, part 3)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from leaderboard_helpers import SCORER, evaluate_all, small_release

from rmb_build.cli import main
from rmb_build.leaderboard.entries import assign_slugs, load_entry
from rmb_build.leaderboard.ranking import rank_groups, release_groups

# the whole module: one test loads datasets (torch), and its module fixture, which the others share, must not be
# built twice by the ordering that puts torch tests first (tests/conftest.py)
pytestmark = pytest.mark.torch

DATA = "predictions/test-00000-of-00001.parquet"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """Three real evaluations of one small release and their ``push-results --dry-run`` folders."""
    tmp = tmp_path_factory.mktemp("pushres")
    release = small_release(tmp / "release")
    scorer = tmp / "scorer.py"
    scorer.write_text(SCORER, encoding="utf-8")
    folders = evaluate_all(release, tmp, ["baseline:length", "baseline:random", f"python:{scorer}:shortest"])
    pushed = []
    for k, folder in enumerate(folders):
        out = tmp / f"hf{k}"
        assert main(["push-results", str(folder), "--repo-id", f"org/rm{k}", "--dry-run", "--out", str(out)]) == 0
        pushed.append(out)
    return folders, pushed


def ranked(sources) -> list[dict]:
    """What the leaderboard computes from ``sources``: each entry's figures and its test against the next."""
    entries = [load_entry(s) for s in sources]
    assign_slugs(entries)
    groups = rank_groups(release_groups(entries), resamples=500, seed=0)
    return [
        {"rm": e.rm, "release": e.release, "values": e.values, "ci95": e.ci95, "n": e.n, "vs_next": e.vs_next}
        for g in groups
        for e in g.entries
    ]


def test_dry_run_loads_with_datasets_and_holds_the_evaluation_unchanged(evaluated, tmp_path):
    from datasets import load_dataset

    folders, pushed = evaluated
    for folder, out in zip(folders, pushed):
        assert sorted(p.name for p in out.iterdir()) == ["README.md", "predictions", "results.json"]
        assert (out / "results.json").read_bytes() == (folder / "results.json").read_bytes()
        assert "configs:" in (out / "README.md").read_text()
        ds = load_dataset(str(out), split="test", cache_dir=str(tmp_path / out.name))
        lines = [json.loads(x) for x in (folder / "predictions.jsonl").read_text().splitlines()]
        assert [json.loads(p) for p in ds["prediction"]] == lines
        assert ds["outcome"] == [r["outcome"] for r in lines]
        first = lines[0]["scores"]
        assert ds[0]["scores"] == [first["chosen"], first["rejected"]]


def test_leaderboard_ranks_the_pushed_form_exactly_as_the_evaluation_folders(evaluated, tmp_path):
    folders, pushed = evaluated
    original = ranked(folders)
    assert [r["vs_next"]["significant"] is not None for r in original[:-1]] == [True, True]  # tests really ran
    assert ranked(pushed) == original
    assert ranked([folders[0], pushed[1], folders[2]]) == original  # the two forms side by side
    for site, sources in (("a", folders), ("b", pushed)):
        argv = ["leaderboard", *map(str, sources), "--out", str(tmp_path / site), "--resamples", "500"]
        assert main(argv) == 0
    pages = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.json"))
    assert pages and pages == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.json"))
    assert all((tmp_path / "a" / p).read_bytes() == (tmp_path / "b" / p).read_bytes() for p in pages)


def test_the_release_identity_travels(evaluated, tmp_path, capsys):
    """A pushed result of another release (its sha256) is refused beside these, as its folder would be."""
    folders, pushed = evaluated
    other = tmp_path / "other"
    shutil.copytree(pushed[1], other)
    results = json.loads((other / "results.json").read_text())
    results["release_info"]["sha256"] = "0" * 64
    (other / "results.json").write_text(json.dumps(results))
    assert main(["leaderboard", str(pushed[0]), str(other), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmb leaderboard: error: the results come from 2 releases") and "\n" not in err
    assert not (tmp_path / "site").exists()


def test_a_tampered_or_foreign_form_is_refused_in_one_line(evaluated, tmp_path, capsys):
    folders, pushed = evaluated
    bad = tmp_path / "bad"
    shutil.copytree(pushed[0], bad)
    table = pq.read_table(bad / DATA)
    outcome = table.column("outcome").to_pylist()
    outcome[3] = 1.0 - outcome[3]  # the typed column no longer says what the prediction says
    pq.write_table(table.set_column(3, "outcome", pa.array(outcome, pa.float64())), bad / DATA)
    assert main(["leaderboard", str(bad), "--out", str(tmp_path / "site")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rmb leaderboard: error: {bad} [{DATA}]: item 3: field 'outcome': "
        f"{outcome[3]!r} but the prediction says {1.0 - outcome[3]!r}"
    )
    rows = [json.loads(x) for x in (folders[0] / "predictions.jsonl").read_text().splitlines()]
    short = tmp_path / "short"  # an evaluation folder missing one item's prediction
    short.mkdir()
    shutil.copy(folders[0] / "results.json", short)
    (short / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))
    assert main(["push-results", str(short), "--repo-id", "org/x", "--dry-run", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rmb push-results: error: {short / 'predictions.jsonl'}: field 'set': 48 pairwise predictions, "
        "but results.json counts 49 items: not one evaluation"
    )
    results = json.loads((folders[0] / "results.json").read_text())
    del results["release_info"]["sha256"]
    (short / "results.json").write_text(json.dumps(results))
    assert main(["push-results", str(short), "--repo-id", "org/x", "--dry-run", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rmb push-results: error: {short / 'results.json'}: field 'release_info': records no")
    assert not (tmp_path / "o").exists()
    # --out holding someone else's files (here the evaluation itself) is refused before anything is written
    assert main(["push-results", str(folders[0]), "--repo-id", "org/x", "--dry-run", "--out", str(folders[0])]) == 2
    assert "not an earlier output of this command" in capsys.readouterr().err


def test_an_unreachable_hub_id_fails_at_once_in_one_line(tmp_path, capsys):
    assert main(["leaderboard", "org/never-pushed", "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmb leaderboard: error: org/never-pushed: no such folder, and the Hub dataset cannot be")
    assert "\n" not in err


def _push(env_extra: dict, folder: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="0", HF_HOME=str(tmp_path / "hf-home"), HF_ENDPOINT="http://127.0.0.1:9", **env_extra)
    return subprocess.run(
        [sys.executable, "-m", "rmb_build.cli", "push-results", str(folder), "--repo-id", "org/x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_a_push_without_a_token_or_a_hub_fails_in_one_line_before_any_upload(evaluated, tmp_path):
    """The Hub cannot be reached here: the endpoint is a closed local port (nothing listens on 9)."""
    folders, _ = evaluated
    done = _push({}, folders[0], tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "rmb push-results: error: cannot push: no Hugging Face token (set HF_TOKEN or run 'hf auth login')"
    )
    token = "hf_CANARY" + "x" * 20
    done = _push({"HF_TOKEN": token}, folders[0], tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("rmb push-results: error: cannot push to org/x: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "CANARY" not in done.stdout + done.stderr


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_a_hub_id_is_read_from_the_hub_cache_offline(evaluated, tmp_path):
    """``rmb leaderboard ORG/NAME``: huggingface_hub's own snapshot_download, offline, on a cache holding a
    snapshot of the pushed dataset (laid out as the Hub's cache lays it out), ranks as the folder."""
    _, pushed = evaluated
    repo = tmp_path / "hub" / "datasets--org--rm0"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(pushed[0], repo / "snapshots" / commit)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    for source, site in (("org/rm0", "from-hub"), (str(pushed[0]), "from-folder")):
        done = subprocess.run(
            [sys.executable, "-m", "rmb_build.cli", "leaderboard", source, "--out", str(tmp_path / site)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    pages = sorted((tmp_path / "from-hub" / "rm").rglob("results.json"))
    assert pages and [p.read_bytes() for p in pages] == [
        p.read_bytes() for p in sorted((tmp_path / "from-folder" / "rm").rglob("results.json"))
    ]


def test_the_cards_headline_marks_few_items_and_intervals_pooling_small_scenarios():
    """The pushed card's table carries the report's marks: † beside a count under 10 items and beside an interval
    that pools scenarios of fewer than 10 items (conservative there)."""
    from rmb_build.evaluate.published import render_card

    overall = {
        "cells": {"pairwise/Helpfulness": 0.7, "pairwise/Harmlessness": 0.6},
        "mean": 0.65,
        "ci95": {"pairwise/Helpfulness": [0.6, 0.8], "pairwise/Harmlessness": [0.2, 0.9], "mean": [0.5, 0.8]},
        "n": {"pairwise/Helpfulness": 40, "pairwise/Harmlessness": 4},
        "few_item_scenarios": {"pairwise/Helpfulness": 0, "pairwise/Harmlessness": 2, "mean": 2},
    }
    card = render_card({"rm": "baseline:length", "release": "r", "rmb_overall": overall}, "me/x")
    assert "| pairwise/Helpfulness | 70.0 | [60.0, 80.0] | 40 |" in card
    assert "| pairwise/Harmlessness | 60.0 | [20.0, 90.0] † | 4 † |" in card
    assert "| rmb_overall | 65.0 | [50.0, 80.0] † |" in card
    assert "† beside a count" in card
    plain = {**overall, "n": {"pairwise/Helpfulness": 40, "pairwise/Harmlessness": 40}, "few_item_scenarios": {}}
    assert "†" not in render_card({"rm": "baseline:length", "release": "r", "rmb_overall": plain}, "me/x")
