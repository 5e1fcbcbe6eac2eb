"""Faults: a whole ``rmb build`` (a real process) through the fault proxy in front of the scripted stub
endpoint (these tests are about the toolkit's fault handling, not the model) completes, and every query and answer is accounted for: in the release, or in failures.jsonl
with its stage and reason, with the manifest's counts adding up. An endpoint that goes away for a
minute in the middle of a stage is waited for (``outage_limit_s``), and the build completes."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from reliability_helpers import ALL_FAULTS, NAME, BuildProcess, CountingProxy, prefect_api, run_build, write_config  # noqa: F401
from stub_endpoint import StubEndpoint

from rmb_build.pipeline.run_state import read_failures
from rmb_build.release.load import read_release

pytestmark = pytest.mark.slow


def check_accounting(work) -> dict:
    """Every selected query and requested answer is in the release or in a counted bucket with a reason;
    every answer lost to a failure is in failures.jsonl with its stage and reason."""
    release = work / "data" / "release" / NAME
    manifest = json.loads((release / "manifest.json").read_text())
    acc = manifest["accounting"]
    q, a = acc["queries"], acc["answers"]
    assert acc["balanced"], acc
    assert q["gathered"] == sum(q["dedup_removed"].values()) + sum(q["not_selected"].values()) + q["selected"]
    assert q["selected"] == q["in_release"] + sum(q["not_in_release"].values())
    assert a["requested"] == a["failed"] + a["generated"]
    assert a["generated"] == a["in_release"] + sum(a["not_in_release"].values())

    failures = read_failures(work / "runs" / NAME)
    assert all(f.stage and f.reason and f.query_id for f in failures)
    per_stage = Counter(f.stage for f in failures)
    assert manifest["failures"] == {"total": len(failures), "per_stage": dict(per_stage)}
    assert a["failed"] == per_stage["generate"]
    # An answer without a judge score is exactly one judge failure (query, generator).
    judge_failed = {(f.query_id, f.generator) for f in failures if f.stage == "judge"}
    unscored = sum(n for reason, n in a["not_in_release"].items() if "not scored by the judge" in reason)
    assert unscored == len(judge_failed)

    # The release's answers are the ones counted in it.
    rel = read_release(release)
    assert manifest["counts"]["answers"] == a["in_release"]
    assert manifest["counts"]["queries"] == q["in_release"]
    assert manifest["counts"]["items"] == {
        s: n for s, n in (("pairwise", len(rel.pairwise)), ("bon", len(rel.bon))) if n
    }
    return manifest


def test_build_completes_through_30_percent_faults(tmp_path, prefect_api):
    # judge.max_reasks 0: a judge reply that ignores the schema is final (the judge never gets a usable
    # reply). That fault is injected exactly once; every other one is retryable and no request gets more
    # of them than the client retries, so the other queries' answers are all scored and make items.
    # One request at a time: a timeout means a stalled reply, never a queued one.
    retryable = [f for f in ALL_FAULTS if f != "bad_schema"]
    with (
        StubEndpoint() as stub,
        CountingProxy(stub.base_url, mix=retryable, fraction=0.3, seed=3, retry_after_s=1.0, stall_s=30) as proxy,
    ):
        # Every kind of fault at least once, then 30% of requests at random; the judge's bad schema for sure.
        proxy.schedule(*[f for fault in retryable for f in (fault, None)])
        proxy.judge_faults.append("bad_schema")
        config = write_config(tmp_path, proxy.url, concurrency=1, timeout_s=15, max_reasks=0)
        work = tmp_path / "work"
        run_build(config, work, prefect_api, timeout=900)
    injected = sum(proxy.injected.values())
    assert set(proxy.injected) == set(ALL_FAULTS), proxy.injected
    total = sum(n for p, n in proxy.received.items() if p.endswith("/chat/completions"))
    assert injected >= 0.25 * total, (injected, total)
    manifest = check_accounting(work)
    failures = read_failures(work / "runs" / NAME)
    assert [(f.stage, "schema" in f.reason) for f in failures] == [("judge", True)], failures
    # The three queries whose answers were all scored make a pair each (strong 9 over weak 3).
    assert manifest["counts"]["items"]["pairwise"] >= 3
    assert manifest["usage"]


def test_build_waits_out_a_one_minute_outage(tmp_path, prefect_api):
    with StubEndpoint() as stub, CountingProxy(stub.base_url) as proxy:
        config = write_config(tmp_path, proxy.url)  # outage_limit_s: the 600 s default
        work = tmp_path / "work"
        stub.hold("generate", after=2)  # the endpoint goes away in the middle of generate, whatever the speed
        run = BuildProcess(config, work, prefect_api)
        deadline = time.monotonic() + 300
        while proxy.answered["generate"] < 2:
            assert run.proc.poll() is None and time.monotonic() < deadline, run.output()[-4000:]
            time.sleep(0.02)
        proxy.take_away(60)
        back = time.monotonic() + 60
        stub.release()
        assert run.wait(900) == 0, run.output()[-6000:]
    assert any(t >= back for t, _, _ in proxy.requests)  # the build went on once the endpoint was back
    manifest = check_accounting(work)
    assert manifest["accounting"]["answers"]["generated"] == 8  # nothing was given up on
    # Backed off, not polled: each waiting request tries about a dozen times in a minute (capped
    # exponential backoff), where a retry every second would make ~60 tries each.
    usage = [row for models in manifest["usage"].values() for row in models.values()]
    assert sum(r["retries"] for r in usage) <= 12 * sum(r["requests"] for r in usage)
    failures = read_failures(work / "runs" / NAME)
    assert not [f for f in failures if "unreachable" in f.reason or "connect" in f.reason], failures
