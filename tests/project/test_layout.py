"""The house's rules, checked on every run: the import-linter contracts (layers, no cycles, Prefect only
on its side) and ruff (lint and format) over every source folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        pytest.fail(f"{name} is not installed: pip install -e '.[test]' installs it")
    return found


def test_import_contracts_hold():
    proc = _run(_tool("lint-imports"), "--no-cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_ruff_lint_and_format_pass_over_every_source_folder():
    lint = _run(_tool("ruff"), "check", ".")
    assert lint.returncode == 0, lint.stdout[-4000:]
    fmt = _run(_tool("ruff"), "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout[-4000:]
