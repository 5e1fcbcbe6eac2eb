"""Evaluation folders for the leaderboard tests, made by the real ``rmb evaluate`` and ``rmb leaderboard``."""

from __future__ import annotations

import json
from pathlib import Path

from rmb_build.cli import main
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.audit import audit_release
from rmb_build.release.read import Release, read_rmb_release

PAIRWISE_SCENARIOS = (
    "Helpfulness/Chat/Discussion",
    "Helpfulness/Code/Documentation",
    "Harmlessness/S1",
    "Harmlessness/S6",
)
BON_SCENARIOS = ("Helpfulness/Chat/Discussion", "Harmlessness/S6")

SCORER = """
def longest(conversation, answer):
    return float(len(answer))


def shortest(conversation, answer):
    return -float(len(answer))
"""


def small_release(root: Path) -> Path:
    """A release of every RMB cell in which the chosen answer is mostly, not always, the longer one.

    Its manifest carries the real audit summary of its items, as a built release's does; one pair with
    the same answer twice gives that audit a defect to report.
    """
    rel = Release(name="leaderboard-small", root=None)
    for s, scenario in enumerate(PAIRWISE_SCENARIOS):
        for i in range(12):
            q = (Turn("user", f"Question {i} about {scenario}?", "en"),)
            long, short = f"A careful answer number {i}, {s} with detail.", f"Short {i}{s}."
            chosen, rejected = (long, short) if (i + s) % 4 else (short, long)
            rel.add(PairwiseItem(str(12 * s + i), q, Answer("m1", chosen), Answer("m2", rejected), scenario))
    same = Answer("m1", "The same answer.")
    rel.add(PairwiseItem("48", (Turn("user", "Twice?", "en"),), same, same, "Harmlessness/S1"))
    for s, scenario in enumerate(BON_SCENARIOS):
        for i in range(10):
            q = (Turn("user", f"Best-of-N question {i} in {scenario}?", "en"),)
            losers = (Answer("m2", f"No {i}{s}."), Answer("m3", f"Maybe {i}, {s}."))
            best = f"The best answer of all, number {i}, {s}." if i % 3 else f"Yes{i}{s}"
            rel.add(BonItem(str(10 * s + i), q, Answer("m1", best), losers, scenario))
    write_release(rel, root)
    audit = audit_release(read_rmb_release(root, strict=False), near_duplicates=False)
    (root / "manifest.json").write_text(json.dumps({"name": rel.name, "audit": audit.summary()}), encoding="utf-8")
    return root


def evaluate_all(release: Path, out_root: Path, specs: list[str]) -> list[Path]:
    """One real ``rmb evaluate`` run per RM spec; returns the output folders."""
    folders = []
    for k, spec in enumerate(specs):
        out = out_root / f"eval{k}"
        rc = main(
            [
                "evaluate",
                "--release",
                str(release),
                "--rm",
                spec,
                "--out",
                str(out),
                "--cache",
                str(out_root / "cache"),
                "--bootstrap",
                "200",
                "--no-progress",
            ]
        )
        assert rc == 0, spec
        folders.append(out)
    return folders


def own_site(tmp: Path) -> tuple[Path, list[Path]]:
    """The site of four RMs (two kinds) on the small release: (index.html, evaluation folders)."""
    release = small_release(tmp / "release")
    scorer = tmp / "scorer.py"
    scorer.write_text(SCORER, encoding="utf-8")
    folders = evaluate_all(
        release, tmp, ["baseline:length", "baseline:random", f"python:{scorer}:longest", f"python:{scorer}:shortest"]
    )
    return build(folders, tmp / "site"), folders


def sample_site(sample: Path, tmp: Path) -> tuple[Path, list[Path]]:
    """The site of baseline:length and baseline:random on the official sample."""
    folders = evaluate_all(sample, tmp, ["baseline:length", "baseline:random"])
    return build(folders, tmp / "site"), folders


def build(folders: list[Path], site: Path) -> Path:
    assert main(["leaderboard", *map(str, folders), "--out", str(site), "--resamples", "2000"]) == 0
    return site / "index.html"


def load_results(folders: list[Path]) -> dict[str, dict]:
    """results.json of each folder, by RM spec."""
    out = {}
    for f in folders:
        r = json.loads((f / "results.json").read_text(encoding="utf-8"))
        out[r["rm"]] = r
    return out
