"""Quiet by default: ``audit`` (on a small release: the chatter comes from loading the encoder, whatever
the release's size), and on the official sample ``publish --dry-run`` and ``classify-eval``, print no
third-party INFO line and no model-loading bar; ``-v`` brings them back."""

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


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(c, marks=pytest.mark.slow) for c in ("audit", "publish", "classify-eval")
    ],  # each a subprocess loading the encoder
)
def test_commands_print_no_third_party_chatter(request, tmp_path, command):
    if command == "audit":
        argv = ["audit", str(small_release(tmp_path / "small"))]
    else:
        argv = _sample_argv(request.getfixturevalue("rmb_sample"), tmp_path, command)
    err = _rmb(*argv, cwd=tmp_path)
    assert "sentence_transformers" not in err and not THIRD_PARTY_INFO.search(err), err[-4000:]
    assert "Loading weights" not in err and "it/s]" not in err and "ba/s]" not in err, err[-4000:]


def _sample_argv(rmb_sample, tmp_path, command: str) -> list[str]:
    return {
        "publish": [
            "publish",
            str(rmb_sample),
            "--repo-id",
            "org/sample",
            "--license",
            "mit",
            "--dry-run",
            "--out",
            str(tmp_path / "hf"),
        ],
        "classify-eval": ["classify-eval", str(rmb_sample)],
    }[command]


@pytest.mark.slow
def test_verbose_shows_them(rmb_sample, tmp_path):
    err = _rmb("-v", "audit", str(rmb_sample), cwd=tmp_path)
    assert "INFO sentence_transformers" in err and "Loading weights" in err
