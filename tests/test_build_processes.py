"""``rmb build`` as a real process: an error inside the flow is one line on stderr (a traceback only
with RMB_DEBUG=1); SIGKILL leaves no process of the build behind (Prefect's temporary server, the
embedded llama.cpp server); SIGTERM stops it as Ctrl-C does, and a rerun resumes."""

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
from reliability_helpers import NAME, BuildProcess, build_env, prefect_api, run_build, write_config  # noqa: F401
from stub_endpoint import StubEndpoint

pytestmark = pytest.mark.slow

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d INFO ")  # our progress lines (cli.configure_logging's format)
INTERRUPTED = "rmb build: interrupted; finished work is kept, run it again to resume"


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


def test_sigterm_stops_a_build_like_ctrl_c_and_a_rerun_resumes(tmp_path, prefect_api):
    work = tmp_path / "work"
    with StubEndpoint() as stub:
        config = write_config(tmp_path, stub.base_url)
        stub.hold("generate", after=2)  # generate is under way when the signal comes
        run = BuildProcess(config, work, prefect_api)
        deadline = time.monotonic() + 300
        while stub.count("generate") < 2 or _cached(work, "generate") < 2:  # two answers received and stored
            assert run.proc.poll() is None and time.monotonic() < deadline, run.output()[-4000:]
            time.sleep(0.05)
        answered = {str(r.body) for r in stub.requests if r.stage == "generate"}
        run.proc.send_signal(signal.SIGTERM)
        assert run.wait(120) == 143, run.output()[-4000:]
        assert run.output().rstrip().splitlines()[-1] == INTERRUPTED
        assert "Traceback" not in run.output()
        stub.release()
        seen = len(stub.requests)
        run_build(config, work, prefect_api)
    asked_again = [r for r in stub.requests[seen:] if str(r.body) in answered]
    assert asked_again == []  # the rerun used the answers the stopped build had
    assert (work / "data" / "release" / NAME / "manifest.json").exists()
