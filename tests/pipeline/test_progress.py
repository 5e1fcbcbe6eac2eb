"""A build you can watch: per-stage progress (done/total, rate, ETA, LLM calls and cost) through the
one step every batch takes, and a log (no TTY) that is never silent for long while a stage works."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from reliability_helpers import build_config, write_queries
from stub_endpoint import StubEndpoint, request_stage

from rmb_build.pipeline.progress import BuildProgress, bars_wanted


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_log_lines_give_done_total_rate_and_eta():
    log = logging.getLogger("test.progress")
    log.setLevel(logging.INFO)
    log.addHandler(seen := _Lines())
    progress = BuildProgress(log, "log", interval_s=0.05)
    try:
        progress.expect("generate", 4)
        for _ in range(2):
            progress.begin("generate")
        progress.done("generate")
        deadline = time.monotonic() + 10
        while not seen.lines and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        progress.close()
        log.removeHandler(seen)
    assert seen.lines, "a working stage wrote no progress line"
    assert re.search(r"generate: 1/4 batches, .* batches/min, ETA \d+m\d\ds", seen.lines[0]), seen.lines[0]


def test_finished_and_off_stages_write_nothing():
    log = logging.getLogger("test.progress.quiet")
    log.setLevel(logging.INFO)
    log.addHandler(seen := _Lines())
    done, off = BuildProgress(log, "log", interval_s=0.05), BuildProgress(log, "off", interval_s=0.05)
    try:
        for p in (done, off):
            p.begin("gather")
        done.done("gather")
        time.sleep(0.3)
    finally:
        done.close()
        off.close()
        log.removeHandler(seen)
    assert seen.lines == []


QUERIES = ["What is the boiling point of water at sea level?", "Name three primary colours."]
SLOW_S = 7.0  # each generate and judge reply: 4 of each, one at a time, make each stage ~30 s


def _slow(req: dict) -> None:
    if request_stage(req) in ("generate", "judge"):
        time.sleep(SLOW_S)
    return None  # the scripted reply


@pytest.mark.slow
def test_a_slow_build_log_is_never_silent_and_shows_done_total(tmp_path: Path):
    src = tmp_path / "queries.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": p, "scenario": "Helpfulness/Open QA/Factual"}) + "\n"
            for i, p in enumerate(QUERIES)
        )
    )
    with StubEndpoint(reply=_slow, log=False) as stub:
        cfg = {
            "name": "slow",
            "license": "CC0-1.0",
            "endpoints": {"stub": {"base_url": stub.base_url, "max_retries": 0, "max_concurrency": 1}},
            "sources": [{"kind": "jsonl", "path": str(src), "license": "CC0-1.0"}],
            "generators": [{"endpoint": "stub", "model": m} for m in ("strong", "weak")],
            "judge": {"endpoint": "stub", "model": "judge", "samples": 1},
            "guard": {"endpoint": "stub", "model": "guard"},
            "run": {"batch_size": 1},
            "min_generators": 2,
            "stages": ["gather", "generate", "judge", "guard", "build_sets"],
        }
        (tmp_path / "build.yaml").write_text(yaml.safe_dump(cfg))
        cmd = [sys.executable, "-m", "rmb_build.cli", "build", "--runner", "local"]
        cmd += ["--config", str(tmp_path / "build.yaml"), "--workdir", str(tmp_path / "work")]
        env = {**os.environ, "CI": ""}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        stamped: list[tuple[float, str]] = []
        reader = threading.Thread(target=lambda: stamped.extend((time.monotonic(), ln) for ln in proc.stdout))
        reader.start()
        started = time.monotonic()
        try:
            code = proc.wait(timeout=300)
        finally:
            proc.kill()
            reader.join(timeout=10)
    log = "".join(ln for _, ln in stamped)
    assert code == 0, log
    times = [started] + [t for t, _ in stamped]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= 30, f"the log was silent for {max(gaps):.0f} s:\n{log}"
    for stage in ("generate", "judge"):
        assert re.search(rf"progress: {stage}: [01]/2 batches", log), log
    assert re.search(r"progress: generate: .* LLM calls: \d+ sent, \d+ cached, \d+ failed; cost so far \$", log), log
    assert re.search(r"progress: (generate|judge): .*; requests \d+/\d+ done", log), log


def _unreadable_answer_verdicts(req: dict) -> str | None:
    last = req["messages"][-1]["content"]
    return "I am not sure about that one." if request_stage(req) == "guard" and "Agent:" in last else None


def test_guard_failures_are_counted_by_reason_with_the_file_that_lists_them(tmp_path, caplog):
    """Not ``failures=2`` alone: how many failed for which reason, and where each is listed."""
    from rmb_build.pipeline.config import parse_config
    from rmb_build.pipeline.run import run_local

    with StubEndpoint(reply=_unreadable_answer_verdicts) as stub, caplog.at_level("INFO", logger="rmb_build"):
        cfg = build_config(write_queries(tmp_path / "queries.jsonl"), stub.base_url)
        cfg["stages"] = ["gather", "generate", "judge", "guard", "build_sets"]
        run_local(parse_config(cfg), tmp_path / "work")
    lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("guard: ") and "failed" in r.getMessage()
    ]
    failures = tmp_path / "work" / "runs" / cfg["name"] / "failures.jsonl"
    listed = sum('"stage": "guard"' in ln for ln in failures.read_text().splitlines())
    assert listed and lines == [
        f"guard: {listed} failed: {listed} verdicts unreadable: the reply was not a Llama Guard verdict "
        f"(each listed in {failures})"
    ]


class _Tty:
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("ci, bars", [("", True), ("false", True), ("true", False), ("1", False)])
def test_a_terminal_gets_bars_but_not_under_ci(monkeypatch, ci, bars):
    monkeypatch.setenv("CI", ci)
    assert bars_wanted(_Tty()) is bars
    with open(os.devnull) as not_a_terminal:
        assert bars_wanted(not_a_terminal) is False


def _line_mid_batch(client, stub, progress, stage, reqs, resolved, backdate=0.0):
    """``stage``'s progress line while ``reqs`` run with the stub holding every reply after the first, once
    ``resolved`` (a stage, a count) have an outcome; ``backdate``: seconds the stage is made to have run."""
    stub.hold("generate", after=1)  # the stub counts non-JSON chat requests as "generate"
    held = threading.Thread(target=client.run, args=(reqs,))
    held.start()
    try:
        deadline = time.monotonic() + 30
        while client.flow(resolved[0])[0] < resolved[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        progress._stages[stage].started -= backdate
        return progress.line(stage)
    finally:
        stub.release()
        held.join(timeout=30)


def test_a_step_counts_the_requests_it_sends_for_other_stages_from_when_it_began(tmp_path):
    """The gold check asks the judge's model: its line counts those requests, request by request (a long
    single batch moves before it ends), and not the judge requests sent before it began."""
    from rmb_build.llm import LLMClient
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.llm.types import ChatRequest

    def req(i):
        return ChatRequest(endpoint="stub", model="judge", messages=[("user", f"q{i}")], stage="judge", max_tokens=8)

    with StubEndpoint() as stub:
        client = LLMClient({"stub": EndpointConfig(base_url=stub.base_url)}, tmp_path / "cache", progress=False)
        try:
            client.run([req(0), req(1)])  # the judge's requests before the gold step
            progress = BuildProgress(
                logging.getLogger("test.progress.gold"),
                "off",
                lambda: client,
                sends=lambda s: ("judge", "guard") if s == "gold" else (s,),
            )
            progress.begin("gold")
            assert progress.line("gold") == "gold: 0/1 batches, 0m00s elapsed"
            line = _line_mid_batch(client, stub, progress, "gold", [req(i) for i in range(2, 5)], ("judge", 3))
            progress.close()
        finally:
            client.close()
    assert "LLM calls: 1 sent, 0 cached, 0 failed" in line, line
    assert re.search(r"requests 1/3 done in the batches begun, [\d.]+/min, ETA \d+m\d\ds for those", line), line


def test_the_rate_and_eta_count_only_requests_the_endpoint_answers(tmp_path):
    """A resumed build finds most replies cached, resolved at once: counted in the rate, they made the first
    lines promise an ETA of a minute for an hour's work (seen on a resumed 1,560-request build)."""
    from rmb_build.llm import LLMClient
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.llm.types import ChatRequest

    def req(i):
        return ChatRequest(endpoint="stub", model="gen", messages=[("user", f"q{i}")], stage="generate", max_tokens=8)

    with StubEndpoint() as stub:
        client = LLMClient({"stub": EndpointConfig(base_url=stub.base_url)}, tmp_path / "cache", progress=False)
        try:
            client.run([req(i) for i in range(3)])  # cached before the resumed run
            progress = BuildProgress(logging.getLogger("test.progress.resumed"), "off", lambda: client)
            progress.begin("generate")
            # 3 earlier, 3 cached, 1 sent; the one sent took a minute
            line = _line_mid_batch(client, stub, progress, "generate", [req(i) for i in range(6)], ("generate", 7), 60)
            progress.close()
        finally:
            client.close()
    assert "LLM calls: 1 sent, 3 cached, 0 failed" in line, line
    assert re.search(r"requests 4/6 done in the batches begun, 1\.0/min, ETA 2m0[01]s for those", line), line


def test_elapsed_counts_from_the_first_batch_not_from_when_the_stage_was_expected():
    progress = BuildProgress(logging.getLogger("test.progress.expected"), "off")
    try:
        progress.expect("judge", 2)
        progress._stages["judge"].started -= 600  # expected ten minutes before its first batch
        progress.begin("judge")
        assert progress.line("judge") == "judge: 0/2 batches, 0m00s elapsed"
    finally:
        progress.close()


def test_the_whole_builds_time_left_comes_from_the_planned_batches_and_the_rate_so_far(tmp_path):
    """Before any reply: not known, and which stages wait. Once generate's first batch is answered: its
    batches left (asked per begun batch, times the batches expected) at the rate so far, a lower bound
    while the judge has answered nothing; once both have answered, the figure alone."""
    from rmb_build.llm import LLMClient
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.llm.types import ChatRequest

    def req(stage, i):
        return ChatRequest(endpoint="stub", model=stage, messages=[("user", f"q{i}")], stage=stage, max_tokens=8)

    with StubEndpoint() as stub:
        client = LLMClient({"stub": EndpointConfig(base_url=stub.base_url)}, tmp_path / "cache", progress=False)
        progress = BuildProgress(logging.getLogger("test.progress.whole"), "off", lambda: client)
        try:
            progress.expect("generate", 3)
            progress.expect("judge", 3)
            assert progress.whole_build() == "; whole build: ETA ? (no request answered yet: generate, judge)"
            progress.begin("generate")
            client.run([req("generate", i) for i in range(2)])  # the first of 3 batches: 2 requests, answered
            progress._stages["generate"].started -= 60  # ... in a minute
            # 6 planned, 2 answered in 60 s: 4 left, 120 s
            assert re.fullmatch(r"; whole build: ETA >= 2m0[01]s \(judge not measured yet\)", progress.whole_build())
            progress.done("generate")
            progress.begin("judge")
            client.run([req("judge", 0)])
            line = progress.whole_build()
        finally:
            progress.close()
            client.close()
    assert re.fullmatch(r"; whole build: ETA \d+m\d\ds", line), line


def test_a_bar_cut_at_the_terminals_width_still_shows_the_whole_builds_time_left(tmp_path):
    """tqdm cuts a bar at the terminal's width; the demo's generate bar ran past 150 columns with the whole
    build's ETA last, so a 150-column tmux never showed it. It now comes first after the bar's counts."""
    import io

    from tqdm import tqdm

    from rmb_build.llm import LLMClient
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.llm.types import ChatRequest

    with StubEndpoint() as stub:
        client = LLMClient({"stub": EndpointConfig(base_url=stub.base_url)}, tmp_path / "cache", progress=False)
        progress = BuildProgress(logging.getLogger("test.progress.bar"), "off", lambda: client)
        try:
            progress.expect("generate", 30)
            progress.begin("generate")
            client.run(
                [
                    ChatRequest(
                        endpoint="stub", model="g", messages=[("user", f"q{i}")], stage="generate", max_tokens=8
                    )
                    for i in range(3)
                ]
            )
            postfix = progress.bar_postfix("generate")
        finally:
            progress.close()
            client.close()
    out = io.StringIO()
    bar = tqdm(total=30, desc="generate", unit="batch", file=out, ncols=100, mininterval=0)
    bar.set_postfix_str(postfix, refresh=True)
    bar.close()
    shown = out.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert "LLM calls: 3 sent" in postfix and "requests 3/3" not in shown, (postfix, shown)  # cut at 100 columns
    assert re.search(r"whole build: ETA \d+m\d\ds", shown), shown


def test_while_a_check_runs_before_the_chains_the_time_left_names_the_stages_not_planned_yet(tmp_path):
    """The gold check's requests are answered before the chains are planned: its figure alone would promise
    the whole build in the check's minutes."""
    from rmb_build.llm import LLMClient
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.llm.types import ChatRequest

    with StubEndpoint() as stub:
        client = LLMClient({"stub": EndpointConfig(base_url=stub.base_url)}, tmp_path / "cache", progress=False)
        progress = BuildProgress(
            logging.getLogger("test.progress.unplanned"),
            "off",
            lambda: client,
            sends=lambda s: ("judge",) if s == "gold" else (s,),
            llm_stages=("generate", "judge"),
        )
        try:
            assert progress.whole_build() == "; whole build: ETA ? (no request answered yet: generate, judge)"
            progress.begin("gold")
            client.run([ChatRequest(endpoint="stub", model="j", messages=[("user", "q")], stage="judge", max_tokens=8)])
            line = progress.whole_build()
        finally:
            progress.close()
            client.close()
    assert re.fullmatch(r"; whole build: ETA >= \d+m\d\ds \(generate, judge not measured yet\)", line), line


def test_a_build_says_what_it_will_run_before_any_work_and_every_progress_line_ends_with_the_time_left(
    tmp_path, caplog, monkeypatch
):
    from rmb_build.cli import main
    from rmb_build.pipeline import progress as progress_module

    monkeypatch.setattr(progress_module, "LOG_INTERVAL_S", 0.05)  # a line from every working stage
    with StubEndpoint() as stub, caplog.at_level("INFO", logger="rmb_build"):
        cfg = build_config(write_queries(tmp_path / "queries.jsonl"), stub.base_url)
        cfg["stages"] = ["gather", "generate", "judge", "guard", "build_sets"]
        (tmp_path / "build.yaml").write_text(yaml.safe_dump(cfg))
        argv = [
            "build",
            "--runner",
            "local",
            "--config",
            str(tmp_path / "build.yaml"),
            "--workdir",
            str(tmp_path / "w"),
        ]
        assert main(argv) == 0
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == (
        f"progress: build {cfg['name']!r} begins on the local runner: stages gather, generate, judge, guard, "
        "build_sets; whole build: ETA ? (known once the LLM stages answer)"
    ), said[:3]
    lines = [m for m in said if m.startswith("progress: ")]
    assert len(lines) > 1, said
    assert all(re.search(r"; whole build: ETA (\?|>= \d+m\d\ds|\d+m\d\ds)( \([^)]*\))?$", m) for m in lines), lines
