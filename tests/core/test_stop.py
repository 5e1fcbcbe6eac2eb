"""A command's stop (``rmb_build/core/stop.py``, the CLI's stop line), with real signals sent to this process.
The stopped builds themselves, on both runners, are in tests/pipeline/test_processes.py."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from rmb_build.cli import stop_line
from rmb_build.core import stop

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals")


@pytest.fixture
def ctrl_c_live():
    """Ctrl-C handled as Python's default for the test: a suite started as a background job (``cmd &``) inherits
    SIGINT ignored, and an ignored signal stays ignored by design (the test below checks that)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_first_signal_is_noted_runs_the_callbacks_once_and_stops(ctrl_c_live):
    calls = []
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with stop.handlers():
        stop.on_stop(lambda: calls.append(stop.received()))
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received() == signal.SIGTERM and calls == [signal.SIGTERM]
        os.kill(os.getpid(), signal.SIGTERM)  # a repeated SIGTERM: the stop is under way, nothing is raised
        with pytest.raises(KeyboardInterrupt):  # a repeated Ctrl-C breaks off a stop that hangs
            os.kill(os.getpid(), signal.SIGINT)
        assert stop.received() == signal.SIGTERM and calls == [signal.SIGTERM]
    assert stop.received() is None
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_callback_registered_after_the_stop_runs_at_once(ctrl_c_live):
    """A stop that lands in an import is raised when the import ends; ``rmb build`` registered Prefect's
    silencer in between and the flow engine's "Crash detected!" lines followed the stop's line (CI, stop 58)."""
    calls = []
    with stop.handlers():
        stop.note(signal.SIGINT)  # as _handler does for a stop it puts off until an import ends
        stop.on_stop(lambda: calls.append(stop.received()))
        assert calls == [signal.SIGINT]

        def again():
            calls.append("again")

        stop.on_stop(again)
        stop.on_stop(again)  # registered twice: run once
        assert calls == [signal.SIGINT, "again"]


class Terminated(BaseException):
    pass


def test_a_librarys_own_sigterm_handler_runs_after_the_stop_is_noted():
    """As Prefect's flow engine does: its own handler raises its own exception; the stop is noted first."""
    seen = []

    def theirs(signum, frame):
        seen.append(stop.received())
        raise Terminated

    with stop.handlers():
        previous = signal.signal(signal.SIGTERM, theirs)
        try:
            with pytest.raises(Terminated), stop.noting_sigterm():
                os.kill(os.getpid(), signal.SIGTERM)
            assert signal.getsignal(signal.SIGTERM) is theirs  # theirs again once outside
        finally:
            signal.signal(signal.SIGTERM, previous)
    assert seen == [signal.SIGTERM]


def test_the_stop_line_names_the_command_that_resumes_without_credentials():
    args = argparse.Namespace(command="evaluate", _kept=None)
    argv = ["evaluate", "--release", "my rel", "--rm", "openai:gpt@http://me:s3cret@host:8000/v1"]
    line = stop_line(args, argv, signal.SIGINT)
    assert line.startswith(
        "rmb evaluate: stopped by SIGINT; finished work is kept; resume: rmb evaluate --release 'my rel' "
        "--rm openai:gpt@http://"
    )
    assert line.endswith("@host:8000/v1") and "s3cret" not in line and "//me" not in line


def test_a_signal_the_process_ignores_stays_ignored():
    """A job started in the background ignores Ctrl-C: rmb must not start answering it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop.handlers():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.received() is None
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_stopped_build_counts_the_replies_its_cache_keeps(tmp_path):
    from rmb_build.commands.build import kept
    from rmb_build.llm.cache import ResponseCache

    args = argparse.Namespace(run_folder=tmp_path / "runs" / "b")
    assert kept(args) == "nothing to keep yet"  # stopped before the build made its run folder
    with ResponseCache(args.run_folder / "llm_cache") as cache:
        for key, stage in (("k1", "generate"), ("k2", "generate"), ("k3", "judge")):
            cache.put(key, {"text": "x"}, endpoint="http://127.0.0.1/v1", model="m", stage=stage)
    assert kept(args) == f"kept in {args.run_folder}: every finished batch, 3 LLM replies (generate 2, judge 1)"
    (args.run_folder / "llm_cache" / "responses.sqlite").write_bytes(b"not a database " * 100)
    said = kept(args)  # the cache's own one-line error, which names the file and how to recover
    assert said.startswith(f"every finished batch is kept in {args.run_folder} (its LLM cache could not be read: ")
    assert "not a database" in said and "responses.sqlite" in said


class _StoppedInAFinalizer:
    """A finalizer the stop lands in: its exception cannot propagate there ("Exception ignored in ...")."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs in here
            pass


def test_a_stop_swallowed_in_a_finalizer_is_raised_again(ctrl_c_live, capsys):
    """A stop's exception raised inside a finalizer was lost: the command ran on, muted, and exited 0."""
    import time

    with stop.handlers():
        with pytest.raises(KeyboardInterrupt):
            _StoppedInAFinalizer()  # collected at once
            for _ in range(200):  # the stop, raised again, lands here
                time.sleep(0.01)
        assert stop.received() == signal.SIGTERM
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_command_that_returns_after_a_stop_is_reported_stopped(ctrl_c_live, monkeypatch, capsys):
    import rmb_build.cli as cli

    def swallows(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        except KeyboardInterrupt:  # a library that catches everything and carries on
            pass
        return 0

    monkeypatch.setattr(cli, "_call", swallows)
    assert cli.main(["models"]) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert err.startswith("rmb models: stopped by SIGTERM; ") and err.count("\n") == 1, err


def test_a_redelivery_due_after_the_caller_took_the_stop_raises_nothing(ctrl_c_live):
    """A stop swallowed in a finalizer schedules its redelivery; the caller catching the stop meanwhile (the
    CLI printing its line) must not get it again: raised after the line, it escaped the CLI and the build
    ended as an unhandled Ctrl-C (exit -2) instead of 143."""
    import time

    with stop.handlers():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        _StoppedInAFinalizer()  # a second stop exception, swallowed: its redelivery is due in REDELIVER_S
        stop.caught()
        time.sleep(stop.REDELIVER_S * 20)  # the redelivery's moment passes here: nothing raised
        os.kill(os.getpid(), signal.SIGINT)  # nor by a late Ctrl-C while the line is said
        for _ in range(1000):
            pass
        assert stop.received() == signal.SIGTERM


def rmb_program(tmp_path, source: str, command: str = "models") -> str:
    """A script that runs ``rmb <command>`` as the process's entry point, the CLI's ``_call`` replaced by the
    ``command(args)`` that ``source`` defines: its path."""
    script = tmp_path / "program.py"
    script.write_text(
        f"{source}\nimport sys\nimport rmb_build.cli\n\nrmb_build.cli._call = command\n"
        f"sys.argv = ['rmb', {command!r}]\nsys.exit(rmb_build.cli.main())\n"
    )
    return str(script)


STOPPED_IN_EXTENSION_CODE = '''
import ctypes, os, sys

def command(args):
    """The stop lands in code a C extension runs through PyRun_String (as some do while imported)."""
    run = ctypes.pythonapi.PyRun_String
    run.restype = ctypes.py_object
    run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]
    run(b"import os, signal\\nos.kill(os.getpid(), signal.SIGTERM)\\nfor _ in range(10**6): pass", 257, {}, {})
    return 0

'''


def test_a_stop_caught_after_extension_code_exits_with_the_commands_code(tmp_path):
    """CPython exits as an unhandled Ctrl-C (SIGINT, or 130) when a KeyboardInterrupt once left code run
    through PyRun_String, even one the CLI then caught: a build stopped by SIGTERM in an import exited -2."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, rmb_program(tmp_path, STOPPED_IN_EXTENSION_CODE)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stderr.startswith("rmb models: stopped by SIGTERM; ") and done.stderr.count("\n") == 1, done.stderr


def test_a_stop_inside_an_import_is_raised_when_the_import_has_finished(ctrl_c_live, tmp_path, monkeypatch):
    """Raised inside an import, a stop can leave a native extension half initialised (torch, imported by the
    audit's encoder, aborted a stopped build: exit -6). The import finishes; the stop follows at once."""
    import importlib
    import sys
    import time

    (tmp_path / "slow_native_import.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(0.3)\nfinished = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with stop.handlers():
        with pytest.raises(KeyboardInterrupt):
            importlib.import_module("slow_native_import")
            time.sleep(2)  # the stop lands here, after the import
        assert sys.modules["slow_native_import"].finished and stop.received() == signal.SIGTERM
    sys.modules.pop("slow_native_import", None)


def _stopped_while_importing(tmp_path, monkeypatch, name: str, body: str) -> None:
    """Import module ``name`` (``body``, which signals this process and then blocks) under the command's handlers:
    the stop is raised within 10 s, and the module is not left imported."""
    import importlib
    import sys
    import time

    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.monotonic()
    with stop.handlers():
        with pytest.raises(KeyboardInterrupt):
            importlib.import_module(name)
    assert time.monotonic() - started < 10 and name not in sys.modules


def test_a_second_ctrl_c_inside_an_import_is_raised_at_once(ctrl_c_live, tmp_path, monkeypatch):
    body = (
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(0.2)\n"
        "os.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n"
    )
    _stopped_while_importing(tmp_path, monkeypatch, "hanging_import", body)


class _HalfBuilt:
    """An object the stop cut off in its constructor: its finalizer fails (asyncio's loop without _ssock)."""

    def __del__(self):
        raise AttributeError("'_UnixSelectorEventLoop' object has no attribute '_ssock'")


def test_the_stopped_works_teardown_says_nothing_after_the_stop_line(ctrl_c_live, monkeypatch):
    import sys

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)  # what would print "Exception ignored in ..."
    with stop.handlers():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        stop.caught()
        _HalfBuilt()  # collected at once
    assert reported == []
    with stop.handlers():  # without a stop, a failing finalizer is reported as ever
        _HalfBuilt()
    assert [type(r.exc_value) for r in reported] == [AttributeError]


_TEARDOWN = """
import atexit, gc, os, signal, sys, threading

class HalfBuilt:  # as an event loop a stop cut off, finalised by the teardown after its self-pipe socket
    def __del__(self):
        raise ValueError("Invalid file descriptor: -1")

def command(args):
    gc.disable()  # the cycle is left to the interpreter's teardown
    cycle = HalfBuilt()
    cycle.me = cycle
    # as a library's queue drained at exit to a server the stop cut off
    drain = threading.Thread(target=lambda: 1 / 0, name="drain")
    atexit.register(lambda: drain.start() or drain.join())
    try:
        if STOP:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10**8):
                pass
    finally:  # as a cleanup on the way down whose thread fails (its server stopped by the same Ctrl-C)
        cleanup = threading.Thread(target=lambda: 1 / 0, name="cleanup")
        cleanup.start()
        cleanup.join()
    return 0

STOP = sys.argv[-1] == "stop"
"""


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stopped_processs_teardown_says_nothing_after_the_stop_line(tmp_path, stopped):
    """CI's run: ``rmb build`` stopped by SIGTERM 0.01 s into its stages printed its one line, then the
    interpreter's teardown finalised an event loop the stop had cut off, after its self-pipe socket
    (``Exception ignored in: BaseEventLoop.__del__``). A process that ends stopped says nothing but its line
    (nor does a thread that fails on the way down or at exit); one that ends as usual still reports them all."""
    args = [sys.executable, rmb_program(tmp_path, _TEARDOWN, "doctor"), "stop" if stopped else "run"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONDEVMODE")}
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**env, "RMB_DEBUG": "0"})
    lines = done.stderr.splitlines()
    if stopped:
        assert done.returncode == 143 and len(lines) == 1, done.stderr
        assert lines[0].startswith("rmb doctor: stopped by SIGTERM; "), done.stderr
    else:
        assert done.returncode == 0 and "Exception ignored in" in done.stderr, done.stderr
        assert "Exception in thread drain" in done.stderr and "Exception in thread cleanup" in done.stderr, done.stderr


_HUNG_EXIT = """
import os, signal, sys, threading
from rmb_build.core import stop

stop.EXIT_GRACE_S = 2.0

def command(args):
    # a thread the interpreter waits for at exit, which never ends (a library's worker waiting on what the stop cut off)
    threading.Thread(target=threading.Event().wait, name="waits-for-good").start()
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10**8):
        pass
    return 0
"""


def test_a_stopped_process_whose_exit_hangs_ends_after_the_grace(tmp_path):
    """CI's run: ``rmb build`` on Prefect, stopped by SIGTERM, printed its line and then ran past 300 s: its exit
    waited on something that never ended, and it ignores signals from its line on. It ends after
    ``stop.EXIT_GRACE_S`` with its code."""
    try:
        program = rmb_program(tmp_path, _HUNG_EXIT, "doctor")
        done = subprocess.run([sys.executable, program], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the stopped process did not end: {exc.stderr!r}")
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines()[0].startswith("rmb doctor: stopped by SIGTERM; "), done.stderr


def test_an_import_that_hangs_is_stopped_anyway(ctrl_c_live, tmp_path, monkeypatch):
    """A stop waits for the import it arrived in for IMPORT_WAIT_S at most; the wait is woken from a blocking
    sleep (a redelivery that only set the flag waited out the sleep)."""
    monkeypatch.setattr(stop, "IMPORT_WAIT_S", 0.5)
    body = "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(30)\n"
    _stopped_while_importing(tmp_path, monkeypatch, "hangs_on_import", body)


STOPPED_IN_TEARDOWN_CODE = """
import atexit, sys, time

def command(args):
    atexit.register(time.sleep, 60)  # an exit handler that waits (a server stopping, a thread joined)
    print("ended", flush=True)
    return 0

"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_after_the_command_ended_exits_at_once_in_one_line(tmp_path, sig):
    """A stop in the interpreter's teardown, after the command had ended (a build's summary printed): Python's own
    handling there killed the build by SIGTERM without a word (exit -15), or printed a Ctrl-C's traceback from the
    exit handler it landed in. The process now says so in one line and ends at once with 128 + the signal."""
    run = subprocess.Popen(
        [sys.executable, rmb_program(tmp_path, STOPPED_IN_TEARDOWN_CODE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert run.stdout.readline() == "ended\n"
        time.sleep(0.5)  # into the exit handler's wait
        run.send_signal(sig)
        out, err = run.communicate(timeout=30)  # at once, not after the 60 s wait
    finally:
        run.kill()
    assert run.returncode == 128 + sig, err
    assert err == f"rmb models: stopped by {sig.name}; it had ended (exit 0) and its outputs are whole\n", err


STOPPED_IN_CATCH_WARNINGS_CODE = """
import os, signal, sys, warnings

async def never_awaited():
    pass

def command(args):
    pending = never_awaited()  # kept from being awaited by the stop; freed with this frame, after the stop's line
    with warnings.catch_warnings():  # as Prefect's flow call does: on the way out it restores the filters
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10**6):
            pass
    return 0

"""


def test_a_stop_inside_a_catch_warnings_block_prints_only_its_line(tmp_path):
    """The stop's warning filter (a coroutine never awaited belongs to the stop) was added inside a library's
    catch_warnings block, which dropped it on the way out: "coroutine 'run_flow_async' was never awaited" followed
    a stopped Prefect build's line."""
    program = rmb_program(tmp_path, STOPPED_IN_CATCH_WARNINGS_CODE)
    done = subprocess.run([sys.executable, program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stderr.startswith("rmb models: stopped by SIGTERM; ") and done.stderr.count("\n") == 1, done.stderr
