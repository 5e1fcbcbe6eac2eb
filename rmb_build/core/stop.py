"""A command's stop: SIGINT (Ctrl-C) or SIGTERM ends it as Ctrl-C does, and the CLI says so in one line.

``rmb_build.cli`` runs each command inside :func:`handlers`. The first signal is noted, the
:func:`on_stop` callbacks run at once (what would otherwise print on the way down is silenced
there, before anything unwinds: Prefect's crash reports, ``pipeline/env.py``), then
KeyboardInterrupt unwinds the command. A library that swaps in its own SIGTERM handler while it
runs (Prefect's flow engine) is wrapped by :func:`noting_sigterm`, so the stop is noted first there too.

A stop is never lost: the exception a handler raises can land where Python cannot propagate it (a
finalizer, a callback: "Exception ignored in ...") and the command ran on, muted, to exit 0. Such a
swallowed stop is delivered again at once (:func:`_redeliver`, from ``sys.unraisablehook``); a command's
loop calls :func:`check` between steps; and the CLI treats a command that returns after a stop as
stopped. A stop that arrives inside an import is raised when the import has finished (a native extension
interrupted while it initialises can abort the process); a second Ctrl-C is raised at once. In a process
that ends stopped, threads that fail from the stop on and the interpreter's teardown print nothing under the
line (:func:`quiet_threads`, :func:`quiet_exit`).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []  # the stop signals received inside handlers(), in order
_callbacks: list[Callable[[], None]] = []
REDELIVER_S = 0.01
_raise_again: list[bool] = []  # a stop exception was swallowed (or put off): the next signal handled raises
_redelivering: list[bool] = []  # the signal being handled is this module's redelivery
_caught: list[bool] = []  # the command's caller has the stop in hand: nothing is raised again


def received() -> int | None:
    """The first stop signal received (``signal.SIGINT`` or ``signal.SIGTERM``), None when none came."""
    return _received[0] if _received else None


def on_stop(callback: Callable[[], None]) -> None:
    """Run ``callback`` at the first stop signal (once; registered twice, still once), or now where the stop
    came already: one that landed in an import is raised only when the import ends, and the command runs on
    until then (Prefect's flow engine started and reported its crash when ``rmb build`` registered its
    silencer after such a stop)."""
    if callback in _callbacks:
        return
    _callbacks.append(callback)
    if _received:
        callback()


def note(signum: int) -> None:
    """Record a stop signal; the first runs the :func:`on_stop` callbacks."""
    _received.append(signum)
    if len(_received) == 1:
        for callback in list(_callbacks):
            callback()


def caught() -> None:
    """The stop reached the command's caller (the CLI): a stop exception swallowed from now on (a
    finalizer on the way down) is not raised again."""
    _caught.append(True)


def ended_by() -> None:
    """The command took the stop as its own end (``rmb serve`` runs until Ctrl-C): it exits with its own
    code, not as a stopped command."""
    _received.clear()
    _caught.append(True)


def check() -> None:
    """Raise KeyboardInterrupt when a stop came (a checkpoint between a command's steps: a stop whose
    exception was swallowed ends the command at its next step)."""
    if _received:
        raise KeyboardInterrupt


def _handler(signum: int, frame: FrameType | None) -> None:
    if _caught:  # the caller has the stop in hand (its line said, or its normal end): nothing to raise
        return
    redelivered = bool(_redelivering)  # from this module's timer, not from outside
    _redelivering.clear()
    outstanding = bool(_raise_again)
    _raise_again.clear()
    first = not _received
    if not redelivered:
        note(signum)
    # A repeated Ctrl-C is a person who wants out (of a cleanup that hangs, of an import): raised at once.
    if signum == signal.SIGINT and not first and not redelivered:
        raise KeyboardInterrupt
    # A repeated SIGTERM is Prefect sending the first on (or a supervisor repeating it): the stop is
    # under way, unless its exception was swallowed (outstanding).
    if first or outstanding or redelivered:
        if _importing(frame) and _may_wait():
            _raise_later(signum)
            return
        raise KeyboardInterrupt


IMPORT_RETRY_S = 0.05
IMPORT_WAIT_S = 10.0  # an import the stop waits on longer than this (one that hangs) is stopped anyway
_waiting_since: list[float] = []


def _may_wait() -> bool:
    """Whether a stop may still wait for the import it arrived in (``IMPORT_WAIT_S`` from its first wait)."""
    import time

    if not _waiting_since:
        _waiting_since.append(time.monotonic())
    return time.monotonic() - _waiting_since[0] < IMPORT_WAIT_S


def _importing(frame: FrameType | None) -> bool:
    """Whether the main thread is inside an import: a stop raised there can leave a native extension half
    initialised (torch, imported by the audit's encoder, aborted the process: exit -6 after the stop line)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _raise_later(signum: int) -> None:
    """The stop, raised once the import it arrived in has finished (checked every ``IMPORT_RETRY_S``)."""
    _raise_again.append(True)
    threading.Timer(IMPORT_RETRY_S, _interrupt_unless_caught, (signum,)).start()


def _is_stop(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a stop's exception: KeyboardInterrupt, or one a library raised from its own
    handler after the stop (Prefect's TerminationSignal: a BaseException that is no Exception)."""
    return isinstance(exc, KeyboardInterrupt) or (
        bool(_received)
        and isinstance(exc, BaseException)
        and not isinstance(exc, (Exception, GeneratorExit, SystemExit))
    )


def _redeliver(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a stop's exception raised where it could not propagate is raised again,
    from the next signal check of the main thread; anything else goes to the previous hook, except once
    the caller has the stop: then it is the stopped work's teardown (a finalizer of an object the stop cut
    off while it was being built: an event loop without its self-pipe) and belongs to the stop's line."""
    if _caught and _received:  # an echo of the stop the caller reports
        return
    if not _is_stop(unraisable.exc_value) or not _received:
        _previous_hook[0](unraisable)
        return
    for sig in (_received[0], *SIGNALS):
        if callable(signal.getsignal(sig)):
            _raise_again.append(True)
            # From another thread, a moment later: tripped here, the handler would run inside this hook,
            # where its exception is lost again.
            threading.Timer(REDELIVER_S, _interrupt_unless_caught, (sig,)).start()
            return


def _interrupt_unless_caught(sig: int) -> None:
    """The redelivery itself, skipped where the caller took the stop meanwhile: raised after its line,
    the stop's exception would end the process as an unhandled Ctrl-C (exit -2), not with its code."""
    if _caught or not _raise_again:
        return
    handler = signal.getsignal(sig)
    if handler is not _handler and handler not in _wrappers:
        return  # the command's handlers are gone: so is the stop
    _redelivering.append(True)
    try:
        # A real signal to the main thread wakes a wait it is blocked in (a sleep, a select, a join):
        # interrupt_main only sets the flag a running main thread checks.
        signal.pthread_kill(threading.main_thread().ident or 0, sig)
    except (AttributeError, OSError, ValueError):  # no pthread_kill here, or the thread is gone
        _thread.interrupt_main(signal.Signals(sig))


_wrappers: list[Callable[[int, Any], None]] = []  # this module's wrappers of a library's handler (noting_sigterm)


_previous_hook: list[Callable[[Any], Any]] = [sys.unraisablehook]


def _clear_state() -> None:
    """Forget every stop: the state :func:`handlers` starts and ends with."""
    for state in (_received, _callbacks, _raise_again, _redelivering, _waiting_since, _caught):
        state.clear()


@contextlib.contextmanager
def handlers() -> Iterator[None]:
    """SIGINT and SIGTERM note the stop and raise KeyboardInterrupt (in the main thread; elsewhere
    signals cannot be handled and this does nothing). A signal this process was started with ignored
    (a job started in the background ignores Ctrl-C) stays ignored. The state starts and ends empty."""
    _clear_state()
    previous = {}
    hook = None
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _handler)
        hook, _previous_hook[0] = sys.unraisablehook, sys.unraisablehook
        sys.unraisablehook = _redeliver
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) not in _end_handlers:  # a finished command's last handler stays to the end
                signal.signal(sig, handler)
        if hook is not None and sys.unraisablehook is _redeliver:
            sys.unraisablehook = hook
        _clear_state()


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

    def noted(signum: int, frame: FrameType | None) -> None:
        if _caught:
            return
        if not _redelivering:  # a redelivery is the stop already noted
            note(signum)
        _redelivering.clear()
        _raise_again.clear()
        if _importing(frame) and _may_wait():  # as _handler: the library's exception waits for the import
            _raise_later(signum)
            return
        theirs(signum, frame)

    signal.signal(signal.SIGTERM, noted)
    _wrappers.append(noted)
    try:
        yield
    finally:
        _wrappers.remove(noted)
        if signal.getsignal(signal.SIGTERM) is noted:
            signal.signal(signal.SIGTERM, theirs)


_end_handlers: list[Callable[[int, Any], None]] = []


def end_at_once(line: Callable[[int], str]) -> None:
    """For a process whose command has ended, its outputs whole: a stop in what is left of it (the interpreter's
    teardown: its exit handlers, the threads it waits for) writes ``line(signum)`` to stderr and ends the process
    at once with ``128 + signum``. Python's own handling there ended a build that had finished killed by SIGTERM
    without a word, or printed a Ctrl-C's traceback from an exit handler. Servers the command started end with it
    (``pipeline/watchdog.py``, their parent-death signal). Call inside :func:`handlers`, from the main thread; a
    signal the process ignores stays ignored."""

    def ended(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(Exception):
            os.write(2, (line(signum) + "\n").encode("utf-8", "replace"))
        os._exit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        return
    _end_handlers[:] = [ended]
    for sig in SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, ended)


def quiet_threads() -> None:
    """From a stop on, a thread that fails (a library's worker whose server the stop cut off) is part of the
    stopped work's unwinding: it prints nothing under the stop's line."""
    threading.excepthook = _say_nothing


def quiet_exit() -> None:
    """For a process that ends stopped, once its line is printed: the interpreter's teardown says nothing, as
    inside :func:`handlers` once the caller has the stop (:func:`_redeliver`). The collector finalises what the
    stop cut off among its parts (an event loop asyncio.run had made when the stop landed, after its self-pipe
    socket: "Exception ignored in: BaseEventLoop.__del__"), and threads drain at exit."""
    sys.unraisablehook = _say_nothing
    quiet_threads()


EXIT_GRACE_S = 120.0  # how long a stopped process's exit handlers may run before it ends without them


def bounded_exit(code: int) -> None:
    """A stopped process ignores further signals while its exit handlers stop its servers: one that hangs there (a
    thread the interpreter waits for, a library's queue drained to a server the stop cut off) would hold it for
    good, deaf to Ctrl-C. After ``EXIT_GRACE_S`` it ends with ``code`` anyway; the servers' watchdog and their
    own parent checks stop them."""
    timer = threading.Timer(EXIT_GRACE_S, _end, (code,))
    timer.daemon = True  # the interpreter's exit does not wait for it
    timer.start()


def _end(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _say_nothing(report: object) -> None:
    """The hooks of a stopped process: read no global (the interpreter may have cleared this module's by then)."""


def clear_unhandled_interrupt() -> None:
    """Let the command's exit code stand. CPython ends a process as an unhandled Ctrl-C (killed by SIGINT,
    or 130) whenever a KeyboardInterrupt once left code run through ``PyRun_String`` (code a C extension
    runs while it is imported, say), even where the CLI caught that stop afterwards: a SIGTERM landing
    there turned exit 143 into -2. Running code through ``PyRun_String`` resets the interpreter's flag."""
    try:
        import ctypes

        run = ctypes.pythonapi.PyRun_String
        run.restype = ctypes.py_object
        run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]
        run(b"None", 258, {}, {})  # 258: Py_eval_input
    except Exception:  # noqa: BLE001 - no ctypes or not CPython: no such flag to clear
        pass
