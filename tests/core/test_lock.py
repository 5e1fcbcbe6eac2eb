"""One writer at a time (``core/lock.py``): a second taker is refused in one line naming the first, and a
holder killed with SIGKILL leaves no stale lock."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rmb_build.core import lock
from rmb_build.core.errors import RMBError

# A child that takes the lock of argv[1], says so, and sleeps until killed.
HOLDER = """
import sys, time
from rmb_build.core import lock
with lock.hold_out(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def hold_in_child(out: Path) -> subprocess.Popen:
    """A child process holding ``out``'s lock (returns once it holds it)."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_second_taker_is_refused_naming_the_first_and_a_killed_holder_frees_it(tmp_path):
    out = tmp_path / "ev"
    child = hold_in_child(out)
    try:
        with pytest.raises(RMBError) as refused:
            with lock.hold_out(out):
                pass
        line = str(refused.value)
        assert "\n" not in line and line.startswith(f"--out {out}: in use by pid {child.pid} on {socket.gethostname()}")
        assert "since 20" in line
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    with lock.hold_out(out):  # the kernel let go of the killed holder's lock
        assert lock.out_lock_file(out).exists()
    assert not lock.out_lock_file(out).exists()  # no lock file is left beside the output


def test_a_lock_taken_again_in_the_same_process_goes_on(tmp_path):
    with lock.hold_out(tmp_path / "ev"), lock.hold_out(tmp_path / "ev"):
        pass
    with lock.hold_out(tmp_path / "ev"):
        pass


def test_many_takers_at_once_one_wins_the_rest_refused(tmp_path):
    """Takers racing to create, lock and remove the same lock file: never two holders at once."""
    script = """
import sys, time
from rmb_build.core import lock
from rmb_build.core.errors import RMBError
out, flag = sys.argv[1], sys.argv[2]
won = 0
for _ in range(200):
    try:
        with lock.hold_out(out):
            with open(flag, "x"):
                pass
            time.sleep(0.0005)
            import os; os.unlink(flag)
            won += 1
    except RMBError:
        pass
print(won)
"""
    flag = tmp_path / "inside"
    kids = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "ev"), str(flag)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [k.communicate(timeout=120) for k in kids]
    # a second holder would find the flag file there (FileExistsError: a traceback, and a non-zero exit)
    assert all(k.returncode == 0 for k in kids), [err for _, err in results]
    assert sum(int(o) for o, _ in results) > 0


def test_a_taker_that_waits_is_told_the_holder_once_as_the_wait_begins(tmp_path):
    out = tmp_path / "ev"
    child = hold_in_child(out)
    told: list[str] = []
    try:
        with pytest.raises(RMBError, match=f"in use by pid {child.pid}"):
            with lock.hold_out(out, wait_s=0.5, on_wait=told.append):
                pass
    finally:
        child.kill()
        child.wait()
    assert len(told) == 1 and told[0].startswith(f"pid {child.pid} on ")
    with lock.hold_out(out, wait_s=0.5, on_wait=told.append):  # free: no wait, nothing told
        pass
    assert len(told) == 1


def test_an_on_wait_that_raises_leaves_no_descriptor_open(tmp_path):
    """A reviewer's finding: ``on_wait`` ran before the waiting descriptor was closed, so one that raised leaked it."""
    import os

    out = tmp_path / "ev"
    child = hold_in_child(out)

    def refuse(holder: str) -> None:
        raise KeyboardInterrupt

    try:
        before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(KeyboardInterrupt):
            with lock.hold_out(out, wait_s=5, on_wait=refuse):
                pass
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        child.kill()
        child.wait()
