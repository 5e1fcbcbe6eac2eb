"""The install timer (``bench/first_run.py``): each line of a command's output stamped with the seconds since its
start, and pip's log split at its own lines into resolving and downloading, and installing."""

from __future__ import annotations

import sys

from bench_helpers import load_bench

first_run = load_bench("first_run")

PIP_LOG = """\
[    0.4s] Obtaining file:///tmp/first-run/repo
[    3.9s]   Preparing editable metadata (pyproject.toml): finished with status 'done'
[    4.2s] Collecting transformers>=5.18 (from rmb_build==0.1.0)
[   57.5s] Successfully built rmb_build
[   60.1s] Installing collected packages: text-unidecode, sortedcontainers, rmb_build
[  136.7s] Successfully installed rmb_build-0.1.0 sortedcontainers-2.4.0 text-unidecode-1.3
"""


def test_a_stamped_pip_log_splits_into_resolving_and_installing(tmp_path):
    log = tmp_path / "install.log"
    log.write_text(PIP_LOG)
    assert first_run.install_split(log) == {"resolve_download": 60.1, "install": 76.6, "distributions": 3}
    log.write_text(PIP_LOG.replace("Successfully installed", "ERROR: could not install"))
    assert first_run.install_split(log) == {}  # a failed install has no split


def test_timed_stamps_each_line_as_it_comes(tmp_path):
    log = tmp_path / "out.log"
    cmd = [sys.executable, "-c", "import sys, time; print('a', flush=True); time.sleep(0.6); print('b')"]
    row = first_run.timed("step", cmd, tmp_path, log)
    assert row["rc"] == 0 and row["seconds"] >= 0.6
    stamps = [float(first_run.STAMP.match(line).group(1)) for line in log.read_text().splitlines()]
    assert len(stamps) == 2 and stamps[1] - stamps[0] >= 0.5, stamps
