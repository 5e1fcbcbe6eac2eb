"""The typed seams (issue 51) hold: mypy, configured in pyproject.toml (``[tool.mypy]``: the packages it checks and
how strictly), reports no error. CI runs only the README's test command, so this test is how mypy runs there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a first run reads torch's and transformers' types: a minute or more on a loaded 2-core machine
def test_mypy_passes_on_the_typed_packages():
    # its cache, .mypy_cache/ (git ignores it), makes a rerun take seconds
    proc = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode == 2 and "No module named mypy" in proc.stderr:
        pytest.fail("mypy is not installed: pip install -c .ci/constraints.txt -e '.[test]' installs it")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("Success"), proc.stdout[-2000:]
