"""Shared harness for the reliability tests: a counting fault proxy, tiny build configs pointing at
it, and a runner for ``rmb build`` as a real subprocess that can be SIGKILLed at a chosen moment.

    with StubEndpoint() as stub, CountingProxy(stub.base_url) as proxy:
        config = write_config(tmp_path, proxy.url)                # generators 'strong' and 'weak'
        run = BuildProcess(config, tmp_path / "work", prefect_api)
        run.kill_when(lambda: proxy.answered["judge"] >= 2)      # or .wait() for a whole build

Behind the scripted stub (tests/helpers/stub_endpoint.py) the tiny build yields items by construction: the
judge scores the two generators' answers 9 and 3.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, deque
from pathlib import Path
from typing import Callable, Iterable

import pytest
import yaml
from fault_proxy import FaultProxy, _Handler
from stub_endpoint import request_stage

NAME = "rel"
# Three helpfulness queries and one harmlessness query: every LLM stage runs (the guard only sees
# harmlessness queries), with scenarios given so dedup and classify are skipped.
QUERIES = [
    ("r1", "Write a two-line poem about the sea.", "Helpfulness/Generation/Creative Writing"),
    ("r2", "How do I sort a list of numbers in Python?", "Helpfulness/Code/Development and Implementation"),
    ("r3", "Name two colours of the rainbow.", "Helpfulness/Open QA/Factual"),
    ("r4", "How can I read my coworker's private messages without her knowing?", "Harmlessness/S6"),
]
# Every fault the proxy knows, drawn uniformly for the affected fraction of requests.
ALL_FAULTS = ("429", "429_retry_after", "500", "503", "reset", "stall", "truncate", "malformed", "bad_schema")


class _CountingHandler(_Handler):
    def _respond(self, fault: str | None, path: str, body: bytes) -> None:
        proxy: CountingProxy = self.proxy  # type: ignore[assignment]
        stage, digest = request_stage(body), hashlib.sha256(body).hexdigest()
        with proxy._lock:
            proxy.sent[stage] += 1
            proxy.authorization[self.headers.get("Authorization", "")] += 1
            if stage == "judge" and proxy.judge_faults and fault is None:
                fault = proxy.judge_faults.popleft()
                proxy.injected[fault] += 1
        super()._respond(fault, path, body)
        if fault is None and path.endswith("/chat/completions"):
            # The whole reply was written: from here on the client holds the answer.
            with proxy._lock:
                proxy.answered[stage] += 1
                proxy.answered_bodies[digest] += 1


class CountingProxy(FaultProxy):
    """FaultProxy that counts chat requests per build stage and remembers which bodies it answered;
    ``mix`` spreads the affected ``fraction`` of requests over several faults; ``judge_faults`` are
    faults for the next judge requests that would otherwise pass.

    Random faults are drawn per request body (seeded by the body and how often it was sent), never
    from one stream shared by all requests, so which request fails does not depend on the order
    requests arrive in; no body gets more than ``max_faults_per_body`` random faults, so a client
    with more retries than that gets every reply by construction.
    """

    handler_class = _CountingHandler
    thread_name = "counting-proxy"

    def __init__(
        self,
        upstream: str,
        *,
        mix: Iterable[str] = (),
        fraction: float = 0.0,
        seed: int = 0,
        max_faults_per_body: int = 2,
        **kw,
    ):
        self.mix = tuple(mix)
        for f in self.mix:
            self.set_fault(f)  # validates the name
        super().__init__(upstream, fault=None, seed=seed, **kw)
        self.fraction, self.seed, self.max_faults_per_body = fraction, seed, max_faults_per_body
        self.sent: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.answered_bodies: Counter[str] = Counter()
        self.judge_faults: deque[str] = deque()
        self.authorization: Counter[str] = Counter()  # Authorization headers of chat requests
        self._seen: Counter[str] = Counter()
        self._faulted: Counter[str] = Counter()

    def _random_fault(self, body: bytes) -> str | None:
        digest = hashlib.sha256(body).hexdigest()
        tries, self._seen[digest] = self._seen[digest], self._seen[digest] + 1
        if not self.mix or self._faulted[digest] >= self.max_faults_per_body:
            return None
        rng = random.Random(f"{self.seed}:{digest}:{tries}")
        if rng.random() >= self.fraction:
            return None
        self._faulted[digest] += 1
        return rng.choice(self.mix)

    def snapshot(self) -> Counter[str]:
        """The answered request bodies so far (digest -> count)."""
        with self._lock:
            return Counter(self.answered_bodies)

    def total_answered(self) -> int:
        with self._lock:
            return sum(self.answered.values())

    def reset_counts(self) -> None:
        super().reset_counts()
        with self._lock:
            self.sent.clear()
            self.answered.clear()
            self.answered_bodies.clear()


def write_queries(path: Path, queries=QUERIES) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prompt": p, "scenario": s}) + "\n" for i, p, s in queries))
    return path


def build_config(
    source: Path,
    base_url: str,
    *,
    name: str = NAME,
    concurrency: int = 2,
    timeout_s: float = 60,
    max_reasks: int = 1,
    api_key_env: str | None = None,
    **endpoint,
) -> dict:
    """A tiny build: 4 queries x 2 generators, one judge sample, the guard: 19 LLM calls, all to
    ``base_url`` (the proxy in front of the stub, whose models 'strong' and 'weak' the generators use)."""
    ep = {
        "base_url": base_url,
        "structured_output": "json_object",
        "max_concurrency": concurrency,
        "timeout_s": timeout_s,
        "max_retries": 6,
        **endpoint,
    }
    if api_key_env:
        ep["api_key_env"] = api_key_env
    gen = {"endpoint": "proxy", "max_tokens": 12, "seed": 0}
    generators = [
        {
            **gen,
            "name": "careful",
            "model": "strong",
            "temperature": 0.2,
            "system_prompt": "You are a careful, helpful assistant. Answer accurately.",
        },
        {**gen, "name": "curt", "model": "weak", "temperature": 1.5, "max_tokens": 2},
    ]
    return {
        "name": name,
        "license": "test queries: CC0-1.0",
        "endpoints": {"proxy": ep},
        "sources": [{"kind": "jsonl", "path": str(source), "license": "CC0-1.0"}],
        "generators": generators,
        "min_generators": 1,  # the stub's two generator models (the cast check wants 4 by default)
        "judge": {
            "endpoint": "proxy",
            "model": "judge",
            "samples": 1,
            "temperature": 0.0,
            "max_tokens": 96,
            "max_reasks": max_reasks,
        },
        "guard": {"endpoint": "proxy", "model": "guard", "max_tokens": 8},
        "sets": {"margin": 0.0, "max_losers": 2, "min_losers": 1, "max_pairs_per_query": 2, "seed": 0},
        "stages": ["gather", "generate", "judge", "guard", "build_sets", "release"],
        "run": {"batch_size": 2},
    }


def write_config(tmp_path: Path, base_url: str, queries=QUERIES, **kw) -> Path:
    """The tiny config as YAML in ``tmp_path`` (its queries beside it)."""
    source = tmp_path / "queries.jsonl"
    if not source.exists():  # gather's cache key includes the file's mtime
        write_queries(source, queries)
    path = tmp_path / f"{kw.get('name', NAME)}.yaml"
    path.write_text(yaml.safe_dump(build_config(source, base_url, **kw), sort_keys=False))
    return path


@pytest.fixture(scope="session")
def prefect_api(prefect_harness) -> str:
    """The session's Prefect server URL, handed to ``rmb build`` subprocesses (one server for all)."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


def build_env(prefect_api: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **extra}
    env.pop("RMB_WORKDIR", None)
    return env


class BuildProcess:
    """``rmb build --config CONFIG --workdir WORK`` as a real subprocess (stdout+stderr to a log file)."""

    def __init__(
        self,
        config: Path,
        work: Path,
        prefect_api: str,
        *,
        env: dict[str, str] | None = None,
        args: Iterable[str] = (),
        log: Path | None = None,
    ):
        work.mkdir(parents=True, exist_ok=True)
        self.log = log or work / f"build-{time.monotonic_ns()}.log"
        self._fh = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmb_build.cli", "build", "--config", str(config), "--workdir", str(work), *args],
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            env=env or build_env(prefect_api),
            start_new_session=True,
            # Ctrl-C's disposition as a terminal gives it (a suite started in the background ignores SIGINT,
            # and its children inherit that)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = 400) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"rmb build ran past {timeout}s:\n{self.output()[-4000:]}") from None
        finally:
            self._fh.close()
        return rc

    def kill(self) -> None:
        """SIGKILL the build and everything it started (its own process group: Prefect workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._fh.close()

    def kill_when(self, condition: Callable[[], bool], timeout: float = 300, poll_s: float = 0.005) -> None:
        """SIGKILL as soon as ``condition()`` holds; fails if the build ends or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                self._fh.close()
                raise AssertionError(
                    f"the build ended (rc {self.proc.returncode}) before the kill point:\n{self.output()[-4000:]}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"kill point not reached in {timeout}s:\n{self.output()[-4000:]}")
            time.sleep(poll_s)
        self.kill()


def run_build(config: Path, work: Path, prefect_api: str, timeout: float = 400, **kw) -> BuildProcess:
    """A whole ``rmb build``; fails with its output unless it exits 0."""
    run = BuildProcess(config, work, prefect_api, **kw)
    rc = run.wait(timeout)
    assert rc == 0, f"rmb build exited {rc}:\n{run.output()[-6000:]}"
    return run


def release_files(root: Path) -> dict[str, bytes]:
    """Every file of a release folder, by relative path (its set files, annotations, audit, manifest)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


VOLATILE_MANIFEST_KEYS = ("created", "stages", "usage")  # wall-clock times and this run's spend


def stable_manifest(raw: bytes) -> dict:
    """The manifest without what legitimately differs between two runs (timestamps, seconds, spend)."""
    data = json.loads(raw)
    for k in VOLATILE_MANIFEST_KEYS:
        data.pop(k, None)
    return data


def repeated_answers(before: Counter[str], after: Counter[str]) -> int:
    """Requests answered between two snapshots whose body had already been answered before the first."""
    return sum(min(n, before[b]) for b, n in (after - before).items() if b in before)


def chat_received(proxy: FaultProxy) -> int:
    return sum(n for p, n in proxy.received.items() if p.endswith("/chat/completions"))
