"""``rmb build`` as a real process: an error inside the flow is one line on stderr (a traceback only
with RMB_DEBUG=1); SIGKILL leaves no process of the build behind (Prefect's temporary server, the
embedded llama.cpp server); Ctrl-C or SIGTERM under either runner stops it in one line, and the command
it names resumes."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_helpers import (  # noqa: F401
    NAME,
    BuildProcess,
    build_env,
    prefect_api,
    release_files,
    run_build,
    write_config,
)
from stub_endpoint import StubEndpoint

from rmb_build.pipeline.watchdog import descendants

pytestmark = pytest.mark.slow

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d INFO ")  # our progress lines (cli.configure_logging's format)


def _build(config: Path, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmb_build.cli", "build", "--config", str(config), "--workdir", str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_an_error_inside_the_build_is_one_line(tmp_path, prefect_api):
    # The judge scores every answer alike: no pair can be built, which the flow finds only at its end.
    with StubEndpoint(qualities={"strong": 5, "weak": 5}) as stub:
        config = write_config(tmp_path, stub.base_url)
        quiet = _build(config, tmp_path / "work", build_env(prefect_api))
        debug = _build(config, tmp_path / "work", build_env(prefect_api, RMB_DEBUG="1"))
    expected = (
        f"rmb build: error: build '{NAME}': no pairwise or BoN item could be built from 4 queries "
        f"(why: {tmp_path / 'work' / 'runs' / NAME / 'summary.json'}, stages.build_sets.stats; failures.jsonl)"
    )
    assert quiet.returncode == 2, quiet.stderr[-4000:]
    # Besides our INFO progress lines, stderr holds exactly the error: no Prefect traceback or failure line.
    assert [ln for ln in quiet.stderr.splitlines() if not LOG_LINE.match(ln)] == [expected], quiet.stderr[-4000:]
    assert debug.returncode == 2 and "Traceback" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1] == expected


def _processes_of(marker: str) -> dict[int, str]:
    """Live processes whose command line or environment names ``marker``: pid -> command line."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if marker in cmdline or marker.encode() in environ:
            found[int(entry.name)] = cmdline
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkilled_build_leaves_no_process_behind(tmp_path):
    """The build starts its own Prefect server and the embedded SmolLM2 server; SIGKILL of the build
    alone (not its process group) must take both down."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q1", "prompt": "Name two colours.", "scenario": "Helpfulness/Open QA/Factual"}\n')
    config = tmp_path / "build.yaml"
    config.write_text(f"""
name: orphans
endpoints: {{local: {{embedded: smollm2, n_ctx: 1024}}}}
sources: [{{kind: jsonl, path: {queries}}}]
generators: [{{endpoint: local, model: smollm2, name: a, max_tokens: 400, seed: 0}}]
judge: {{endpoint: local, model: smollm2, samples: 1, allow_self_judging: true}}
guard: {{endpoint: local, model: smollm2}}
min_generators: 1
stages: [gather, generate, judge, guard, build_sets, release]
""")
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # its own Prefect server
    env.update(HF_HUB_OFFLINE="1", RMB_LLAMA_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmb_build.cli", "build", "--config", str(config), "--workdir", str(work)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "build.log", "wb"),
        start_new_session=True,
    )
    marker = str(work)  # PREFECT_HOME lies under it: every process the build starts inherits it
    try:
        deadline = time.monotonic() + 400
        while True:
            procs = _processes_of(marker)
            cmdlines = " ".join(procs.values())
            if "rmb_build.llm._llama_server" in cmdlines and "uvicorn" in cmdlines:
                break
            assert proc.poll() is None, (tmp_path / "build.log").read_text()[-4000:]
            assert time.monotonic() < deadline, f"servers not up: {procs}"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while _processes_of(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_of(marker) == {}
    finally:
        for pid in _processes_of(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _cached(work: Path, stage: str) -> int:
    """Responses of one stage committed to the build's LLM cache (goal routing's guard calls come first)."""
    db = work / "runs" / NAME / "llm_cache" / "responses.sqlite"
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            return con.execute("SELECT COUNT(*) FROM responses WHERE stage = ?", (stage,)).fetchone()[0]
    except sqlite3.Error:
        return 0


def _alive(pid: int, start: int) -> bool:
    """Whether process ``pid`` started at ``start`` (clock ticks after boot) still runs (zombies do not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0] != "Z" and int(fields[19]) == start


RESULT_FILES = ("Pairwise_set/", "BoN_set/", "annotations.jsonl")


def _result_files(release: Path) -> dict[str, bytes]:
    return {k: v for k, v in release_files(release).items() if k.startswith(RESULT_FILES)}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, bytes]:
    """The tiny build's Pairwise_set/, BoN_set/ and annotations.jsonl, built straight through (in this process's
    runner: both runners give the same release)."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    with StubEndpoint() as stub:
        config = write_config(tmp, stub.base_url)
        run_build(config, tmp / "work", "", args=["--runner", "local"])
    return _result_files(tmp / "work" / "data" / "release" / NAME)


# Ctrl-C in a terminal reaches the build's whole process group (Prefect's own temporary server started
# by the build included); a time limit or a supervisor sends SIGTERM to the build alone.
STOPS = [
    pytest.param("prefect", signal.SIGINT, id="prefect-ctrl-c-own-server"),
    pytest.param("prefect", signal.SIGTERM, id="prefect-sigterm"),
    pytest.param("local", signal.SIGINT, id="local-ctrl-c"),
    pytest.param("local", signal.SIGTERM, id="local-sigterm"),
]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("runner,sig", STOPS)
def test_a_stopped_build_says_one_line_and_resumes(tmp_path, prefect_api, uninterrupted, runner, sig):
    """Stopped during generate: exit 130/143, after the signal one line (the signal, what is kept, the command
    that resumes), no traceback, no process of the build left; the command resumes, asks for no request
    answered before the stop, and writes the same sets and annotations as a build that was never stopped."""
    work = tmp_path / "work"
    env = build_env(prefect_api)
    if sig == signal.SIGINT and runner == "prefect":  # the build starts Prefect's temporary server itself
        env = {k: v for k, v in env.items() if not k.startswith("PREFECT_")}
    args = ["--runner", "local"] if runner == "local" else []
    with StubEndpoint() as stub:
        config = write_config(tmp_path, stub.base_url)
        stub.hold("generate", after=2)  # generate is under way when the signal comes
        run = BuildProcess(config, work, prefect_api, env=env, args=args)
        deadline = time.monotonic() + 300
        while stub.count("generate") < 2 or _cached(work, "generate") < 2:  # two answers received and stored
            assert run.proc.poll() is None and time.monotonic() < deadline, run.output()[-4000:]
            time.sleep(0.05)
        answered = {str(r.body) for r in stub.requests}
        started = descendants(run.proc.pid)  # the watchdog; with its own Prefect server, that server
        before = len(run.output())
        if sig == signal.SIGINT:
            os.killpg(run.proc.pid, sig)
        else:
            run.proc.send_signal(sig)
        assert run.wait(120) == 128 + sig, run.output()[-4000:]
        deadline = time.monotonic() + 30  # the watchdog polls every second and gives each process 5 s
        while any(_alive(p, s) for p, s in started.items()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p for p, s in started.items() if _alive(p, s)] == []
        resume = f"rmb build --config {config} --workdir {work}" + (" --runner local" if args else "")
        assert [ln for ln in run.output()[before:].splitlines() if ln.strip()] == [
            f"rmb build: stopped by {sig.name}; kept in {work / 'runs' / NAME}: every finished batch, "
            f"6 LLM replies (guard 4, generate 2); resume: {resume}"
        ]
        assert "Traceback" not in run.output() and "ERROR" not in run.output()

        stub.release()
        seen = len(stub.requests)
        run_build(config, work, prefect_api, env=env, args=args)
    assert [r for r in stub.requests[seen:] if str(r.body) in answered] == []
    assert _result_files(work / "data" / "release" / NAME) == uninterrupted
