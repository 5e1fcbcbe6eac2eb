"""A command's stop: SIGINT (Ctrl-C) or SIGTERM ends it as Ctrl-C does, and the CLI says so in one line.

``rmb_build.cli`` runs each command inside :func:`handlers`. The first signal is noted, the
:func:`on_stop` callbacks run at once (what would otherwise print on the way down is silenced
there, before anything unwinds: Prefect's crash reports, ``pipeline/env.py``), then
KeyboardInterrupt unwinds the command. A library that swaps in its own SIGTERM handler while it
runs (Prefect's flow engine) is wrapped by :func:`noting_sigterm`, so the stop is noted first there too.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []  # the stop signals received inside handlers(), in order
_callbacks: list[Callable[[], None]] = []


def received() -> int | None:
    """The first stop signal received (``signal.SIGINT`` or ``signal.SIGTERM``), None when none came."""
    return _received[0] if _received else None


def on_stop(callback: Callable[[], None]) -> None:
    """Run ``callback`` at the first stop signal (once; registered twice, still once)."""
    if callback not in _callbacks:
        _callbacks.append(callback)


def note(signum: int) -> None:
    """Record a stop signal; the first runs the :func:`on_stop` callbacks."""
    _received.append(signum)
    if len(_received) == 1:
        for callback in list(_callbacks):
            callback()


def _handler(signum: int, frame: Any) -> None:
    first = not _received
    note(signum)
    # A repeated SIGTERM is Prefect sending the first on (or a supervisor repeating it): the stop is
    # under way. A repeated Ctrl-C is a person who wants out of a cleanup that hangs.
    if first or signum == signal.SIGINT:
        raise KeyboardInterrupt


@contextlib.contextmanager
def handlers() -> Iterator[None]:
    """SIGINT and SIGTERM note the stop and raise KeyboardInterrupt (in the main thread; elsewhere
    signals cannot be handled and this does nothing). A signal this process was started with ignored
    (a job started in the background ignores Ctrl-C) stays ignored. The state starts and ends empty."""
    _received.clear()
    _callbacks.clear()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _received.clear()
        _callbacks.clear()


@contextlib.contextmanager
def noting_sigterm() -> Iterator[None]:
    """While inside, a SIGTERM is noted before the handler a library installed runs (Prefect raises
    its TerminationSignal from one and reports a crash on the way down: the stop must be noted first)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    theirs = signal.getsignal(signal.SIGTERM)
    if theirs is _handler or not callable(theirs):
        yield
        return

    def noted(signum: int, frame: Any) -> None:
        note(signum)
        theirs(signum, frame)

    signal.signal(signal.SIGTERM, noted)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is noted:
            signal.signal(signal.SIGTERM, theirs)
