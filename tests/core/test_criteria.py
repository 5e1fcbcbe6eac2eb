"""Criteria per scenario: one file for each of the 49 scenarios, no fallback, shipped in the wheel."""

from __future__ import annotations

import glob
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from rmb_build.core.paths import prompts_dir
from rmb_build.core.prompting import criteria_for, criteria_hash, criteria_path
from rmb_build.core.taxonomy import HARMLESSNESS, all_scenarios

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = all_scenarios()
IDS = [s.id for s in SCENARIOS]


@pytest.mark.parametrize("sid", IDS)
def test_each_scenario_has_its_own_criteria_file_that_names_it(sid):
    assert criteria_path(sid) == f"criteria/{sid}.md"
    lines = criteria_for(sid).strip().splitlines()
    assert lines[0].startswith(f"Scenario: {sid} ("), lines[0]
    assert lines[1] == "A good answer:" and lines[-1].startswith("Penalise: ")
    points = lines[2:-1]
    assert [p.split(".", 1)[0] for p in points] == [str(i) for i in range(1, len(points) + 1)]
    assert 6 <= len(lines) <= 10 and all(len(p) > 20 for p in points)
    assert "{{" not in criteria_for(sid)  # inserted as-is into the judge templates


def test_no_two_scenarios_share_criteria_text_or_a_point():
    bodies = {sid: criteria_for(sid).strip().split("\n", 1)[1] for sid in IDS}
    assert len(set(bodies.values())) == len(IDS)
    points = Counter(
        re.sub(r"^\d+\. ", "", line)
        for body in bodies.values()
        for line in body.splitlines()
        if re.match(r"\d+\. ", line)
    )
    assert [p for p, n in points.items() if n > 1] == []


def test_only_the_49_scenario_files_exist_under_criteria():
    root = prompts_dir() / "criteria"
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert found == sorted(f"{sid}.md" for sid in IDS)


@pytest.mark.parametrize("sid", ["Helpfulness/Chat/Karaoke", "Helpfulness/Chat", "Harmlessness/S12", "Harmlessness"])
def test_missing_scenario_file_raises_naming_the_path_without_fallback(sid):
    with pytest.raises(FileNotFoundError, match=re.escape(f"criteria/{sid}.md")):
        criteria_path(sid)
    with pytest.raises(FileNotFoundError, match=re.escape(f"criteria/{sid}.md")):
        criteria_hash(sid)


def test_an_id_that_would_leave_the_criteria_folder_is_rejected():
    with pytest.raises(ValueError, match="not a safe relative path"):
        criteria_path("Harmlessness/../judge/system")


def test_criteria_hash_is_a_short_content_hash_distinct_per_scenario():
    hashes = {sid: criteria_hash(sid) for sid in IDS}
    assert len(set(hashes.values())) == len(IDS)
    sid = "Harmlessness/S10"
    text = (prompts_dir() / "criteria" / f"{sid}.md").read_text(encoding="utf-8")
    assert hashes[sid] == hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def test_harmlessness_criteria_reward_safe_help_and_penalise_both_failure_modes():
    for s in SCENARIOS:
        if s.goal != HARMLESSNESS:
            continue
        penalise = criteria_for(s.id).strip().splitlines()[-1].lower()
        assert "score low" in penalise and "middling at best" in penalise and "refus" in penalise, s.id
    assert "988" in criteria_for("Harmlessness/S10") and "crisis" in criteria_for("Harmlessness/S10")
    s5 = criteria_for("Harmlessness/S5").lower()
    assert all(w in s5 for w in ("doctor", "lawyer", "financial", "consult a professional"))


def test_package_data_globs_cover_every_criteria_file():
    # setuptools expands each package-data pattern with glob(..., recursive=True) under the package folder.
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "rmb_build.prompts"
    ]
    root = REPO / "prompts"
    matched = {Path(f).as_posix() for pat in patterns for f in glob.glob(pat, root_dir=root, recursive=True)}
    assert [sid for sid in IDS if f"criteria/{sid}.md" not in matched] == []


def _wheel_build_command(src: Path, out: Path) -> list[str]:
    """pip wheel without build isolation where the local setuptools can build this project (pyproject's
    build-system floor, 70.1: it builds wheels itself; no registry access then), else with it (pip fetches the build
    requirements)."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
    try:
        setuptools_version = tuple(int(x) for x in version("setuptools").split(".")[:2])
    except PackageNotFoundError:
        return cmd
    return cmd + ["--no-build-isolation"] if setuptools_version >= (70, 1) else cmd


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_wheel_ships_every_criteria_file(tmp_path):
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("rmb_build", "prompts"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    # Built from a copy, so that build/ and *.egg-info never land in the checkout.
    cmd = _wheel_build_command(src, tmp_path / "whl")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode and "--no-build-isolation" not in cmd and "satisfies the requirement setuptools" in proc.stderr:
        pytest.skip("the local setuptools cannot build the wheel and pip could not fetch a newer one")
    assert proc.returncode == 0, proc.stderr[-2000:]
    [wheel] = (tmp_path / "whl").glob("rmb_build-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert [sid for sid in IDS if f"rmb_build/prompts/criteria/{sid}.md" not in shipped] == []
    assert "rmb_build/prompts/judge/pointwise.md" in shipped
