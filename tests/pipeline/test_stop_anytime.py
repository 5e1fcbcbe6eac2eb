"""A stop is never lost: SIGINT or SIGTERM at any moment of a build, on either runner (half of the moments in
the first second of the stages, where a stop once landed in a finalizer and was swallowed: the build ran on,
muted, to exit 0), ends it with exit 130/143 and, after the signal, one line and nothing else."""

from __future__ import annotations

import random
import re
import signal
import sys
import time

import pytest
from reliability_helpers import BuildProcess, build_env, prefect_api, write_config  # noqa: F401
from stub_endpoint import StubEndpoint

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals")]

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (INFO|WARNING) ")
MOMENTS = 26  # per runner: 52 in all
STAGES_STARTED = "gather"  # the first stage's progress line
ENDED = "  audit: "  # the last line of the summary a build prints when it has ended


def _stop_at(run: BuildProcess, sig: signal.Signals, delay: float) -> tuple[int, str] | None:
    """Send ``sig`` ``delay`` seconds after the stages start; (exit code, output after the signal), or None
    when the build had ended before the signal."""
    deadline = time.monotonic() + 300
    while STAGES_STARTED not in run.output():
        if run.proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    time.sleep(delay)
    before = len(run.output())
    if run.proc.poll() is not None:
        run.wait()
        return None
    run.proc.send_signal(sig)
    return run.wait(300), run.output()[before:]


@pytest.mark.parametrize("runner", ["local", "prefect"])
def test_a_stop_at_any_moment_ends_the_build_in_one_line(tmp_path, prefect_api, runner):
    rng = random.Random(f"stop-anytime-{runner}")
    args = ["--runner", "local"] if runner == "local" else []
    stopped = 0
    with StubEndpoint() as stub:
        config = write_config(tmp_path, stub.base_url)
        for i in range(MOMENTS):
            sig = (signal.SIGTERM, signal.SIGINT)[i % 2]
            # the first second of the stages, or anywhere in a tiny build (a few seconds of stages)
            delay = rng.uniform(0, 1.0) if i % 3 else rng.uniform(0, 6.0)
            work = tmp_path / f"work{i}"
            run = BuildProcess(config, work, prefect_api, env=build_env(prefect_api), args=args)
            got = _stop_at(run, sig, delay)
            if got is None:
                continue
            code, after = got
            said = [ln for ln in after.splitlines() if ln.strip() and not LOG_LINE.match(ln)]
            # what followed the signal, its head and tail (a CI report of a long failure keeps only part of it)
            shown = after if len(after) < 6000 else f"{after[:4000]}\n[...]\n{after[-2000:]}"
            what = f"moment {i} ({sig.name} {delay:.2f}s into the stages), after the signal:\n{shown}"
            if code == -sig and not after.strip() and ENDED in run.output():
                # The build had ended: the signal landed in the interpreter's last moments, after its signal
                # handlers were reset (a shell reads it as 128 + the signal too). A stop in the exit handlers
                # before that says so in one line (cli.finished_line), as the assertions below check.
                continue
            stopped += 1
            assert code == 128 + sig, what
            assert len(said) == 1 and said[0].startswith(f"rmb build: stopped by {sig.name}; "), what
            whole = run.output()
            assert "Exception ignored" not in whole and "Traceback" not in whole, f"{what}\nthe whole output:\n{whole}"
    assert stopped >= MOMENTS * 2 // 3  # most moments fell inside the build
