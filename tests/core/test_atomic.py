"""Whole-or-absent folders (``core/atomic.atomic_dir``): what a writer killed mid-way leaves behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rmb_build.core.atomic import atomic_dir


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _write(out: Path, text: str) -> None:
    with atomic_dir(out, owned=("a.txt",), marks=("a.txt",)) as tmp:
        (tmp / "a.txt").write_text(text)


def test_a_killed_writers_hidden_folder_is_swept_and_a_live_ones_kept(tmp_path):
    """A writer SIGKILLed before its rename leaves ``.<name>.tmp-<pid>-…`` (a whole release's worth of
    bytes); the next write of the same output removes it, and never a live writer's."""
    out = tmp_path / "out"
    _write(out, "one")
    stale = tmp_path / f".out.tmp-{_dead_pid()}-abc"
    stale.mkdir()
    (stale / "big.bin").write_bytes(b"x" * 1024)
    live = tmp_path / f".out.tmp-{os.getppid()}-def"  # this test's parent: alive
    live.mkdir()
    other = tmp_path / f".other.tmp-{_dead_pid()}-ghi"  # another output's: not this write's business
    other.mkdir()
    _write(out, "two")
    assert (out / "a.txt").read_text() == "two"
    assert not stale.exists() and live.is_dir() and other.is_dir()


def test_an_output_set_aside_by_a_killed_writer_is_put_back_before_the_next_write(tmp_path):
    """Killed between setting the earlier output aside and renaming the new one in, a writer leaves no
    output and a hidden ``-old`` copy: the next write starts from the output as it was."""
    out = tmp_path / "out"
    _write(out, "one")
    aside = tmp_path / f".out.tmp-{_dead_pid()}-xyz-old"
    os.rename(out, aside)

    class Refused(Exception):
        pass

    try:
        with atomic_dir(out, owned=("a.txt",), marks=("a.txt",)) as tmp:
            (tmp / "a.txt").write_text("half")
            raise Refused  # this write fails too: the output must still be the earlier one
    except Refused:
        pass
    assert (out / "a.txt").read_text() == "one" and not aside.exists()
