"""``atomic.write_once``: a cache folder written once by whichever process comes first, the others waiting for
its folder (two torch servers of one endpoint preparing one model at once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_WRITER = """
import os, sys, time
from pathlib import Path
from rmb_build.core.atomic import write_once
from rmb_build.core.errors import RMBError
out, log, pause, wait = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])

def write(folder):
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    time.sleep(pause)
    (folder / "who").write_text(str(os.getpid()))

try:
    print(write_once(out, write, flag="the cache", wait_s=wait))
except RMBError as exc:
    print("refused:", exc)
"""


def _writer(out: Path, log: Path, pause: float, wait: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(out), str(log), str(pause), str(wait)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(check, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_concurrent_writers_of_one_cache_folder_write_it_once_and_all_get_it(tmp_path):
    """Three processes preparing one folder at once: one writes it, the other two wait for it (atomic_dir alone
    refused them at once: 'in use by pid ...') and return the same whole folder."""
    out, log = tmp_path / "model.torch-1", tmp_path / "writes.log"
    kids = [_writer(out, log, 1.5, 120) for _ in range(3)]
    done = [k.communicate(timeout=300) for k in kids]
    assert all(k.returncode == 0 for k in kids), [err[-2000:] for _, err in done]
    assert [o.strip() for o, _ in done] == [str(out)] * 3, done
    writers = log.read_text().split()
    assert len(writers) == 1 and (out / "who").read_text() == writers[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.torch-1", "writes.log"]  # no hidden leftover


def test_a_writer_killed_midway_leaves_the_folder_to_the_one_waiting(tmp_path):
    """The first writer is SIGKILLed while writing: a second that waits little is refused in one line naming
    it; a third, waiting, then writes the folder itself (the kernel let the lock go; the half-written folder is
    swept)."""
    out, log = tmp_path / "model.torch-1", tmp_path / "writes.log"
    first = _writer(out, log, 600, 0)
    _until(lambda: log.is_file() and log.read_text().strip(), "the first writer never began")
    impatient = _writer(out, log, 0, 0.3)
    said, _ = impatient.communicate(timeout=120)
    assert said.startswith("refused:") and "in use by pid" in said and said.count("\n") == 1, said
    waiting = _writer(out, log, 0, 120)
    time.sleep(0.5)  # let it begin waiting (it writes the folder either way)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    said, err = waiting.communicate(timeout=120)
    assert said.strip() == str(out), err[-2000:]
    assert (out / "who").read_text() == str(waiting.pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.torch-1", "writes.log"]
