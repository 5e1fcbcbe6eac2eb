"""A child process dies with its parent, SIGKILL of the parent included.

Two ties, because each alone has a gap:
- a parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG)``): the kernel signals the child when the
  *thread* that forked it ends, so it is set only where the main thread starts the child (a worker
  thread ending would otherwise kill a child whose parent lives on);
- a watch on the parent's pid inside the child (:func:`die_with_parent`): once the child is re-parented
  (its parent gone, whichever thread started it), it exits. It also covers a parent that died before
  the child could set anything.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable

PR_SET_PDEATHSIG = 1
WATCH_S = 0.5  # how often a child looks at its parent's pid: an orphan lives at most this long


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def started_by_main_thread() -> bool:
    """Whether a child started now would be tied to a thread that lives as long as this process."""
    return threading.current_thread() is threading.main_thread()


def pdeathsig_preexec(sig: int = signal.SIGTERM) -> Callable[[], object] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` giving the child ``sig`` when this process dies, or None
    (not Linux, or not the main thread: see the module's docstring). prctl is looked up here, not in the
    child: between fork and exec only the call itself should run."""
    prctl = _prctl() if started_by_main_thread() else None
    if prctl is None:
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, sig)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os._exit(1)  # re-parented: whoever started this process is gone, and nothing here is worth saving


def die_with_parent(parent: int, *, signal_too: bool = True, sig: int = signal.SIGKILL) -> None:
    """Called first thing in a child: exit when process ``parent`` (this one's parent at start) is gone.

    ``signal_too``: also set the parent-death signal ``sig``; pass False where the parent started this
    process from a thread other than its main one (:func:`started_by_main_thread`, read in the parent)."""
    if signal_too and (prctl := _prctl()) is not None:
        prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:  # gone before the tie was made
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="rmb-lifeline").start()


PARENT_ENV = "RMB_PARENT_PID"  # the environment variable naming a child's parent, for it to watch


def parent_env() -> dict[str, str]:
    """What a child's environment holds for :func:`die_with_named_parent`: this process's pid."""
    return {PARENT_ENV: str(os.getpid())}


def die_with_named_parent(*, signal_too: bool = True) -> None:
    """:func:`die_with_parent` for the parent this process's environment names (``parent_env``); none: nothing."""
    parent = int(os.environ.get(PARENT_ENV, "0"))
    if parent:
        die_with_parent(parent, signal_too=signal_too)


__all__ = ["die_with_named_parent", "die_with_parent", "parent_env", "pdeathsig_preexec", "started_by_main_thread"]
