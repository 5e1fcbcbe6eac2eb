"""``core/lifeline.py``: a child started by the toolkit dies with its parent, SIGKILL included, whether the
main thread or a worker thread started it, and a worker thread that ends does not take its child with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; prctl")

# The parent: a Popen child with the parent-death signal (main thread), a multiprocessing "spawn" child
# that ties itself (as the --devices replicas do), and one started from a worker thread that has ended
# (only the pid watch holds it). It prints the children's pids, then waits to be killed.
PARENT = textwrap.dedent(
    """
    import multiprocessing as mp, os, subprocess, sys, threading, time
    from rmb_build.core.lifeline import die_with_parent, pdeathsig_preexec, started_by_main_thread

    def child(parent, main):
        die_with_parent(parent, signal_too=main)
        time.sleep(600)

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        pids = []
        popen = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=pdeathsig_preexec())
        pids.append(popen.pid)
        p = ctx.Process(target=child, args=(os.getpid(), started_by_main_thread()))
        p.start()
        pids.append(p.pid)
        box = []

        def from_a_thread():
            q = ctx.Process(target=child, args=(os.getpid(), started_by_main_thread()))
            q.start()
            box.append(q)

        t = threading.Thread(target=from_a_thread)
        t.start()
        t.join()
        pids.append(box[0].pid)
        time.sleep(3)  # every child has tied itself, and the thread that started the last one is long gone
        print(" ".join(map(str, pids)), flush=True)
        time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_children_die_with_a_sigkilled_parent_and_outlive_a_finished_thread(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        pids = [int(x) for x in parent.stdout.readline().split()]
        assert len(pids) == 3, pids
        assert all(_alive(p) for p in pids)  # the worker thread's end did not stop its child
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in pids if _alive(p)] == []
    finally:
        for pid in [parent.pid, *pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_child_watches_the_parent_its_environment_names():
    """``parent_env`` names this process to a child; ``die_with_named_parent`` there exits at once where the named
    process is not its parent (gone already), and ties nothing where none is named."""
    from rmb_build.core.lifeline import PARENT_ENV, parent_env

    code = "from rmb_build.core.lifeline import die_with_named_parent; die_with_named_parent(); print('alive')"
    env = {k: v for k, v in os.environ.items() if k != PARENT_ENV}

    def child(extra: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True)

    named = child(parent_env())
    assert (named.returncode, named.stdout) == (0, "alive\n")
    unnamed = child({})
    assert (unnamed.returncode, unnamed.stdout) == (0, "alive\n")
    gone = child({PARENT_ENV: str(os.getpid() + 999_999)})  # no parent of the child's
    assert (gone.returncode, gone.stdout) == (1, "")
