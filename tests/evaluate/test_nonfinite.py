"""A score is a finite number or refused, in one line naming the item: from any RM (the scoring loop every
adapter's scores pass), from the score cache an older run wrote, and in the JSON that results are written as."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from leaderboard_helpers import small_release

from rmb_build.cli import main
from rmb_build.core.atomic import write_json, write_jsonl
from rmb_build.core.errors import RMBError
from rmb_build.core.items import text_key
from rmb_build.evaluate.adapters import load_rm
from rmb_build.evaluate.cache import ScoreCache
from rmb_build.release import read_release

# In the small release, pairwise item 3 (Helpfulness/Chat/Discussion) rejects "Short 30." (model m2).
BAD_ANSWER = "Short 30."


def evaluate(release: Path, rm: str, out: Path, cache: Path) -> int:
    args = ["--release", str(release), "--rm", rm, "--out", str(out), "--cache", str(cache)]
    return main(["evaluate", *args, "--no-progress", "--bootstrap", "20"])


@pytest.fixture
def release(tmp_path) -> Path:
    return small_release(tmp_path / "release")


@pytest.mark.parametrize(
    "bad, said",
    [
        ("float('inf')", "gave Infinity"),
        ("-float('inf')", "gave -Infinity"),
        ("float('nan')", "gave NaN"),
        ("10**400", "gave an integer too large for a float (about 401 digits)"),
    ],
)
def test_a_non_finite_score_is_refused_naming_the_item_and_the_scores_before_it_are_kept(
    tmp_path, release, capsys, bad, said
):
    scorer = tmp_path / "scorer.py"
    scorer.write_text(
        f"def score(conversation, answer):\n    return {bad} if answer == {BAD_ANSWER!r} else float(len(answer))\n"
    )
    spec = f"python:{scorer}:score"
    assert evaluate(release, spec, tmp_path / "out", tmp_path / "cache") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert said in err[0] and "pairwise item 3 (Helpfulness/Chat/Discussion), field 'reject' (m2)" in err[0]
    assert not (tmp_path / "out").exists()  # nothing written, not an Infinity in predictions.jsonl
    with ScoreCache(tmp_path / "cache") as cache:
        assert cache.count(load_rm(spec).fingerprint()) > 0  # what was scored before it is kept


def test_a_non_finite_score_an_older_run_cached_is_refused_on_read(tmp_path, release, capsys):
    assert evaluate(release, "baseline:length", tmp_path / "first", tmp_path / "cache") == 0
    item = next(it for it in read_release(release).items() if it.set_name == "pairwise" and it.uid == "3")
    key = text_key(item.conversation, item.answers()[1].answer)
    db = sqlite3.connect(tmp_path / "cache" / "scores.sqlite")
    with db:  # as an older rmb wrote it: json.dumps(float("inf"))
        assert db.execute("UPDATE scores SET value = 'Infinity' WHERE key = ?", (key,)).rowcount == 1
    db.close()
    capsys.readouterr()
    assert evaluate(release, "baseline:length", tmp_path / "second", tmp_path / "cache") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scores.sqlite: the score cache holds Infinity for pairwise item 3" in err[0], err
    assert "remove that file" in err[0] and not (tmp_path / "second").exists()


def test_json_writers_refuse_a_non_finite_number_naming_the_field(tmp_path):
    out = tmp_path / "results.json"
    out.write_text("{}\n")
    with pytest.raises(RMBError, match=r"results.json: field 'pairwise.overall.ci95\[1\]' is not a finite number"):
        write_json(out, {"pairwise": {"overall": {"macro": 0.5, "ci95": [0.1, math.nan]}}})
    assert out.read_text() == "{}\n"  # the file as it was
    rows = [{"uid": "0", "scores": {"chosen": 1.0}}, {"uid": "1", "scores": {"chosen": math.inf}}]
    with pytest.raises(RMBError, match=r"predictions.jsonl: line 2: field 'scores.chosen' is not a finite number"):
        write_jsonl(tmp_path / "predictions.jsonl", rows)
    assert not (tmp_path / "predictions.jsonl").exists()
    write_json(tmp_path / "fine.json", {"big": 10**400, "x": 1.5})  # an int is exact JSON; only floats can be NaN
    assert json.loads((tmp_path / "fine.json").read_text())["x"] == 1.5
