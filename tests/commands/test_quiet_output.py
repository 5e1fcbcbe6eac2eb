"""Quiet by default: ``audit``, ``publish --dry-run`` and ``classify-eval`` print no third-party INFO line
and no model-loading bar; ``-v`` brings them back. On a small release: the chatter comes from loading the
encoder and the libraries, whatever the release's size (the official sample's ten files cost a minute of
embedding each)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from leaderboard_helpers import small_release

THIRD_PARTY_INFO = re.compile(r" INFO (?!rmb_build)")  # cli.configure_logging's format: "HH:MM:SS INFO name: ..."


def _rmb(*argv: str, cwd) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for var in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS", "RMB_DEBUG"):
        env.pop(var, None)  # as a user's shell has them
    proc = subprocess.run(
        [sys.executable, "-m", "rmb_build.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stderr


@pytest.mark.slow  # each a subprocess loading the encoder
@pytest.mark.parametrize("command", ["audit", "publish", "classify-eval"])
def test_commands_print_no_third_party_chatter(tmp_path, command):
    release = str(small_release(tmp_path / "small"))
    argv = {
        "audit": ["audit", release],
        "publish": [
            "publish",
            release,
            "--repo-id",
            "org/small",
            "--license",
            "mit",
            "--dry-run",
            "--out",
            str(tmp_path / "hf"),
        ],
        "classify-eval": ["classify-eval", release],
    }[command]
    err = _rmb(*argv, cwd=tmp_path)
    assert "sentence_transformers" not in err and not THIRD_PARTY_INFO.search(err), err[-4000:]
    assert "Loading weights" not in err and "it/s]" not in err and "ba/s]" not in err, err[-4000:]


@pytest.mark.slow
def test_verbose_shows_them(tmp_path):
    err = _rmb("-v", "audit", str(small_release(tmp_path / "small")), cwd=tmp_path)
    assert "INFO sentence_transformers" in err and "Loading weights" in err
