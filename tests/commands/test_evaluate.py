"""``rmb evaluate`` and ``rmb compare`` end to end: the cache, resuming, python: scorers, release forms,
and bad input reported as one line (never a traceback)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from release_helpers import tiny_release

from rmb_build.cli import main
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.evaluate.cache import ScoreCache
from rmb_build.release import read_release, write_release

BAD = Path(__file__).parent / "bad_inputs" / "release"


def scorer_file(tmp_path: Path, body: str = "return float(len(answer))") -> Path:
    path = tmp_path / "my_scorer.py"
    path.write_text(
        "CALLS = []\n\ndef score(conversation, answer):\n"
        "    assert conversation[-1]['role'] == 'user' and 'content' in conversation[-1]\n"
        "    CALLS.append(answer)\n"
        f"    {body}\n",
        encoding="utf-8",
    )
    return path


def run_cli(*args: str) -> int:
    return main(["evaluate", *args, "--no-progress", "--bootstrap", "50"])


def test_second_run_scores_nothing_and_a_new_release_only_new_texts(tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel")
    cache = tmp_path / "cache"
    assert (
        run_cli("--release", str(rel), "--rm", "baseline:length", "--out", str(tmp_path / "a"), "--cache", str(cache))
        == 0
    )
    assert "scored 6 texts, 0 from the cache (6 unique of 9)" in capsys.readouterr().out
    assert (
        run_cli("--release", str(rel), "--rm", "baseline:length", "--out", str(tmp_path / "b"), "--cache", str(cache))
        == 0
    )
    assert "scored 0 texts, 6 from the cache" in capsys.readouterr().out
    # A release with one new item: only its new text is scored.
    release = read_release(rel)
    release.add(
        PairwiseItem(
            "3", (Turn("user", "Hi", "en"),), Answer("m1", "Hello!"), Answer("m2", "Hi"), "Helpfulness/Chat/Discussion"
        )
    )
    write_release(release, tmp_path / "rel2")
    assert (
        run_cli(
            "--release",
            str(tmp_path / "rel2"),
            "--rm",
            "baseline:length",
            "--out",
            str(tmp_path / "c"),
            "--cache",
            str(cache),
        )
        == 0
    )
    assert "scored 1 texts, 6 from the cache" in capsys.readouterr().out
    results = json.loads((tmp_path / "c" / "results.json").read_text())
    assert results["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"]["n"] == 2


def test_cache_is_under_the_workdir_when_one_is_given(tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel")
    assert (
        run_cli(
            "--release",
            str(rel),
            "--rm",
            "baseline:random",
            "--out",
            str(tmp_path / "o"),
            "--workdir",
            str(tmp_path / "wd"),
        )
        == 0
    )
    assert (tmp_path / "wd" / "runs" / "score_cache" / "scores.sqlite").is_file()


def test_default_cache_is_the_user_cache_folder_not_the_current_one(tmp_path, monkeypatch, capsys):
    rel = tiny_release(tmp_path / "rel")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert run_cli("--release", str(rel), "--rm", "baseline:random", "--out", str(tmp_path / "o")) == 0
    assert (tmp_path / "xdg" / "rmb" / "score_cache" / "scores.sqlite").is_file()
    assert not (tmp_path / "runs").exists()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert run_cli("--release", str(rel), "--rm", "baseline:random", "--out", str(tmp_path / "o2")) == 0
    assert (tmp_path / "home" / ".cache" / "rmb" / "score_cache" / "scores.sqlite").is_file()
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "$XDG_CACHE_HOME/rmb/score_cache, or ~/.cache/rmb/score_cache" in " ".join(capsys.readouterr().out.split())


def test_an_out_folder_with_files_is_refused_unless_overwrite(tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel")
    args = [
        "--release",
        str(rel),
        "--rm",
        "baseline:length",
        "--out",
        str(tmp_path / "o"),
        "--cache",
        str(tmp_path / "c"),
    ]
    (tmp_path / "o").mkdir()  # an empty folder is fine
    assert run_cli(*args) == 0
    before = (tmp_path / "o" / "results.json").read_bytes()
    capsys.readouterr()
    assert run_cli(*args[:3], "baseline:random", *args[4:]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists and is not empty" in err and "--overwrite" in err
    assert (tmp_path / "o" / "results.json").read_bytes() == before
    assert run_cli(*args[:3], "baseline:random", *args[4:], "--overwrite") == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["rm"] == "baseline:random"


def test_python_scorer_is_called_once_per_unique_text_and_edits_rescore(tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel")
    path = scorer_file(tmp_path)
    spec = f"python:{path}:score"
    assert (
        run_cli("--release", str(rel), "--rm", spec, "--out", str(tmp_path / "a"), "--cache", str(tmp_path / "c")) == 0
    )
    assert "scored 6 texts" in capsys.readouterr().out
    res = json.loads((tmp_path / "a" / "results.json").read_text())
    assert res["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"]["accuracy"] == 1.0
    assert res["pairwise"]["scenarios"]["Helpfulness/Reasoning/Logical Deduction"]["accuracy"] == 0.0
    assert (
        run_cli("--release", str(rel), "--rm", spec, "--out", str(tmp_path / "b"), "--cache", str(tmp_path / "c")) == 0
    )
    assert "scored 0 texts" in capsys.readouterr().out
    scorer_file(tmp_path, "return -float(len(answer))")
    assert (
        run_cli(
            "--release",
            str(rel),
            "--rm",
            spec,
            "--out",
            str(tmp_path / "b"),
            "--cache",
            str(tmp_path / "c"),
            "--overwrite",
        )
        == 0
    )
    assert "scored 6 texts" in capsys.readouterr().out
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    assert res["pairwise"]["scenarios"]["Helpfulness/Reasoning/Logical Deduction"]["accuracy"] == 1.0


def test_python_scorer_by_module_name(tmp_path, monkeypatch, capsys):
    rel = tiny_release(tmp_path / "rel")
    scorer_file(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert (
        run_cli(
            "--release",
            str(rel),
            "--rm",
            "python:my_scorer:score",
            "--out",
            str(tmp_path / "a"),
            "--cache",
            str(tmp_path / "c"),
        )
        == 0
    )
    import my_scorer  # noqa: F401  the module the adapter imported

    assert sorted(sys.modules["my_scorer"].CALLS) == sorted(set(sys.modules["my_scorer"].CALLS))


def test_interrupted_scoring_resumes_from_the_cache(tmp_path, capsys):
    """The scorer fails on the 5th text; the 4 before it are kept and not scored again."""
    rel = tiny_release(tmp_path / "rel")
    marker = tmp_path / "fail"
    marker.write_text("")
    path = scorer_file(
        tmp_path,
        f"import os\n    if len(CALLS) == 5 and os.path.exists({str(marker)!r}):\n"
        "        raise RuntimeError('boom')\n    return float(len(answer))",
    )
    args = [
        "--release",
        str(rel),
        "--rm",
        f"python:{path}:score",
        "--out",
        str(tmp_path / "o"),
        "--cache",
        str(tmp_path / "c"),
        "--batch-size",
        "1",
    ]
    assert run_cli(*args) == 2
    err = capsys.readouterr().err
    assert "raised RuntimeError: boom" in err and err.count("\n") == 1
    with ScoreCache(tmp_path / "c") as cache:
        assert cache.db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 4
    marker.unlink()
    assert run_cli(*args) == 0
    assert "scored 2 texts, 4 from the cache" in capsys.readouterr().out


@pytest.mark.torch
def test_hugging_face_form_gives_the_same_results(tmp_path):
    from rmb_build.release.card import render_card
    from rmb_build.release.hf import write_hf_release

    rel = tiny_release(tmp_path / "rel")
    release = read_release(rel)
    # A folder name no other test uses: `datasets` caches a local folder's prepared data under its name.
    hf = tmp_path / f"hf-form-{tmp_path.name}"
    write_hf_release(release, hf, card=render_card(release, repo_id="me/tiny", license="cc-by-4.0"))
    for src, out in ((rel, "a"), (hf, "b")):
        assert (
            run_cli(
                "--release",
                str(src),
                "--rm",
                "baseline:length",
                "--out",
                str(tmp_path / out),
                "--cache",
                str(tmp_path / "c"),
            )
            == 0
        )
    a, b = (json.loads((tmp_path / o / "results.json").read_text()) for o in "ab")
    assert a["pairwise"] == b["pairwise"] and a["bon"] == b["bon"]


@pytest.mark.parametrize(
    "case, where, expected",
    [
        ("invalid_json.json", "Pairwise_set/Helpfulness/Chat/Discussion.json", "line 11: invalid JSON"),
        (
            "missing_answer.json",
            "Pairwise_set/Helpfulness/Chat/Discussion.json",
            "item 1 (uid 2): field 'chosen.answer': missing",
        ),
        ("bon_no_losers.json", "BoN_set/Helpfulness/Chat/Discussion.json", "field 'loser_list': empty"),
        ("missing_answer.json", "Extra_set/Helpfulness/Chat/Discussion.json", "unknown set folder 'Extra_set'"),
    ],
)
def test_bad_release_is_one_line_without_traceback(tmp_path, case, where, expected):
    rel = tiny_release(tmp_path / "rel")
    target = rel / where
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(BAD / case, target)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmb_build.cli",
            "evaluate",
            "--release",
            str(rel),
            "--rm",
            "baseline:length",
            "--out",
            str(tmp_path / "o"),
            "--cache",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and where.split("/")[0] in proc.stderr


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nonsense", "expected KIND:TARGET"),
        ("magic:x", "unknown RM kind 'magic'"),
        ("baseline:median", "unknown baseline"),
        ("python:no_such_module_xyz:f", "cannot import module"),
        ("hf:/no/such/model", "model '/no/such/model': no such folder: /no/such/model"),
        ("hf:./no-such-model", "no such folder"),
        ("dpo:/no/policy,/no/reference", "model '/no/policy': no such folder"),
        # HF_HUB_OFFLINE=1 (conftest): a Hub id that is not in the local cache fails at once, without retries.
        ("hf:no-such-org-xyz/no-such-model", "not in the local Hugging Face cache, and HF_HUB_OFFLINE=1"),
    ],
)
def test_bad_rm_spec_is_one_line(tmp_path, capsys, spec, message):
    rel = tiny_release(tmp_path / "rel")
    assert (
        run_cli("--release", str(rel), "--rm", spec, "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")) == 2
    )
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_compare_paired_bootstrap(tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel")
    for spec, out in (("baseline:length", "a"), ("baseline:random", "b")):
        assert (
            run_cli("--release", str(rel), "--rm", spec, "--out", str(tmp_path / out), "--cache", str(tmp_path / "c"))
            == 0
        )
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a"),
                str(tmp_path / "a"),
                "--json",
                str(tmp_path / "same.json"),
                "--resamples",
                "200",
            ]
        )
        == 0
    )
    same = json.loads((tmp_path / "same.json").read_text())
    for kind in ("macro", "micro"):
        assert same["pairwise"]["overall"][kind]["diff"] == 0.0 and same["pairwise"]["overall"][kind]["p"] == 1.0
    assert same["rmb_overall"]["diff"] == 0.0 and same["rmb_overall"]["p"] == 1.0
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(tmp_path / "ab.json")]) == 0
    ab = json.loads((tmp_path / "ab.json").read_text())
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    for kind in ("macro", "micro"):
        assert ab["pairwise"]["overall"][kind]["diff"] == pytest.approx(
            a["pairwise"]["overall"][kind] - b["pairwise"]["overall"][kind]
        )
    assert ab["rmb_overall"]["diff"] == pytest.approx(a["rmb_overall"]["mean"] - b["rmb_overall"]["mean"])
    assert (
        set(ab["pairwise"]["goals"]) == {"Helpfulness", "Harmlessness"} and ab["pairwise"]["overall"]["micro"]["n"] == 3
    )
    assert 0 <= ab["pairwise"]["overall"]["micro"]["p"] <= 1
    # One item per scenario: resampling within scenarios cannot vary, and the output says so.
    assert ab["small_scenarios"] == 4 and "4 scenarios have fewer than 5 shared items" in capsys.readouterr().out
    assert ab["ties"] == {"a": "strict", "b": "strict"}
    assert (
        run_cli(
            "--release",
            str(rel),
            "--rm",
            "baseline:random",
            "--out",
            str(tmp_path / "h"),
            "--ties",
            "half",
            "--cache",
            str(tmp_path / "c"),
        )
        == 0
    )
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "b"), str(tmp_path / "h"), "--resamples", "50"]) == 0
    assert "A counts pairwise ties as 'strict', B as 'half'" in capsys.readouterr().out
    (tmp_path / "a" / "predictions.jsonl").write_text('{"set": "pairwise", "uid": "0"}\n')
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "line 1: field 'scenario': missing" in capsys.readouterr().err


def test_identical_pair_is_reported_and_skip_defective_leaves_it_out(tmp_path, capsys):
    rel = tiny_release(tmp_path / "rel")
    release = read_release(rel)
    release.add(
        PairwiseItem(
            "3",
            (Turn("user", "Name a fruit"),),
            Answer("m1", "Apple."),
            Answer("m2", "Apple."),
            "Helpfulness/Chat/Discussion",
        )
    )
    write_release(release, tmp_path / "rel2")
    common = ["--release", str(tmp_path / "rel2"), "--rm", "baseline:length", "--cache", str(tmp_path / "c")]
    assert run_cli(*common, "--out", str(tmp_path / "all")) == 0
    res = json.loads((tmp_path / "all" / "results.json").read_text())
    assert res["release_defects"]["counts"]["identical_pair"] == 1 and "skipped_defective" not in res
    assert res["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"] == {
        **res["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"],
        "n": 2,
        "accuracy": 0.5,
    }  # the identical pair scored a loss...
    report = (tmp_path / "all" / "report.md").read_text()
    assert "## Release defects" in report and "| identical pair | 1 |" in report  # ...and said so
    assert "identical-text pairs the same score, so each counts as a loss" in report
    assert run_cli(*common, "--out", str(tmp_path / "skip"), "--skip-defective") == 0
    res = json.loads((tmp_path / "skip" / "results.json").read_text())
    # tiny_release asks one prompt in two scenarios: the later one is a near-duplicate prompt.
    assert res["skipped_defective"] == {"n": 2, "kinds": {"identical_pair": 1, "near_duplicate_prompt": 1}}
    assert res["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"]["n"] == 1
    assert res["pairwise"]["overall"]["n"] == 2
    rows = (tmp_path / "skip" / "predictions.jsonl").read_text().splitlines()
    assert not any(json.loads(r)["uid"] == "3" and json.loads(r)["set"] == "pairwise" for r in rows)
    assert "these 2 defects on 2 items were left out of scoring" in (tmp_path / "skip" / "report.md").read_text()


def test_clean_release_has_no_defect_section_and_labels_every_figure(tmp_path):
    release = read_release(tiny_release(tmp_path / "tiny"))
    del release.files[("pairwise", "Harmlessness/S1")]  # its prompt is also asked in another scenario
    write_release(release, tmp_path / "rel")
    rel = tmp_path / "rel"
    assert (
        run_cli(
            "--release",
            str(rel),
            "--rm",
            "baseline:length",
            "--out",
            str(tmp_path / "o"),
            "--cache",
            str(tmp_path / "c"),
        )
        == 0
    )
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert not any(res["release_defects"]["counts"].values())
    report = (tmp_path / "o" / "report.md").read_text()
    assert "Release defects" not in report
    assert "| set | overall macro | overall micro | Helpfulness macro | Harmlessness macro | n |" in report
    assert report.index("## RMB overall") < report.index("## Summary")


@pytest.mark.draws_heatmaps
def test_an_rm_spec_holding_mathtext_does_not_stop_evaluate_after_scoring(tmp_path):
    """Issue 48 item 8: `--rm python:<a path with $\\foo$>` scored every item, then stopped at the heatmap's
    title with ParseFatalException (exit 1, nothing written). The spec is drawn as text."""
    folder = tmp_path / "$\\foo$"
    folder.mkdir()
    (folder / "s.py").write_text("def score(conversation, answer):\n    return float(len(answer))\n")
    release = tiny_release(tmp_path / "rel")
    rc = main(
        ["evaluate", "--release", str(release), "--rm", f"python:{folder / 's.py'}:score"]
        + ["--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--no-progress", "--bootstrap", "20"]
    )
    assert rc == 0 and (tmp_path / "out" / "heatmap.png").is_file()


@pytest.mark.parametrize("draws, refused", [(0, True), (100_001, True), (100_000, False)])
def test_a_draws_count_a_page_could_not_read_back_is_refused_before_any_work(tmp_path, capsys, draws, refused):
    """A reviewer's case: evaluate took --bootstrap 100001 and wrote a results.json that rmb leaderboard and
    push-results then refused; the one cap (core.intervals.MAX_DRAWS) is now checked where the number is given."""
    rel = tiny_release(tmp_path / "rel")
    out = tmp_path / "out"
    args = ["evaluate", "--release", str(rel), "--rm", "baseline:length", "--out", str(out)]
    code = main([*args, "--cache", str(tmp_path / "cache"), "--no-progress", "--bootstrap", str(draws)])
    if refused:
        assert code == 2 and not out.exists()
        assert "--bootstrap must be 1 to 100,000" in capsys.readouterr().err
    else:
        assert code == 0
        assert main(["push-results", str(out), "--repo-id", "me/x", "--dry-run", "--out", str(tmp_path / "hf")]) == 0
