"""Crashes: ``rmb build`` as a real process, SIGKILLed during generate, during judge and while writing
the release, started again each time (behind the scripted stub endpoint, which holds a stage's later requests so
each kill lands in the middle of that stage). A restart repeats at most the requests that were in flight at the
kill (counted at the proxy); a run from the complete cache makes no request and writes the same
release byte for byte; two builds sharing one cache at once do not corrupt it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from reliability_helpers import (  # noqa: F401
    NAME,
    BuildProcess,
    CountingProxy,
    chat_received,
    prefect_api,
    release_files,
    repeated_answers,
    run_build,
    stable_manifest,
    write_config,
)
from stub_endpoint import StubEndpoint

CONCURRENCY = 2


def _same_release(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        if name == "manifest.json":
            assert stable_manifest(a[name]) == stable_manifest(b[name])
        else:
            assert a[name] == b[name], f"{name} differs"


@pytest.mark.slow
def test_killed_build_resumes_without_asking_twice(tmp_path, prefect_api):
    work = tmp_path / "work"
    release = work / "data" / "release" / NAME
    building = release.with_name(f".{NAME}.building")
    with StubEndpoint() as stub, CountingProxy(stub.base_url) as proxy:
        config = write_config(tmp_path, proxy.url, concurrency=CONCURRENCY)

        def since(stage: str, n: int):
            base = proxy.answered[stage]
            return lambda: proxy.answered[stage] - base >= n

        # Each kill point is reached by a fresh process resuming the previous one's work.
        for point, condition in [
            ("generate", since("generate", 2)),
            ("judge", since("judge", 2)),
            ("release", building.exists),
        ]:
            if point == "release":
                stub.release()
            else:
                stub.hold(point, after=2)
            before = proxy.snapshot()
            BuildProcess(config, work, prefect_api).kill_when(condition)
            assert repeated_answers(before, proxy.snapshot()) <= CONCURRENCY, point
            assert not release.exists(), f"a release appeared although the build was killed during {point}"
        # Killed while writing: only the hidden .building folder exists, and no file in it is half-written.
        assert building.is_dir()
        for f in building.rglob("*.json"):
            json.loads(f.read_bytes())

        before = proxy.snapshot()
        run_build(config, work, prefect_api)
        assert repeated_answers(before, proxy.snapshot()) <= CONCURRENCY
        assert not building.exists()
        first = release_files(release)
        manifest = json.loads(first["manifest.json"])
        assert manifest["accounting"]["balanced"]
        assert manifest["accounting"]["answers"]["requested"] == 8

        # From the complete cache: no request at all, the same release.
        proxy.reset_counts()
        run_build(config, work, prefect_api)
        assert chat_received(proxy) == 0
        _same_release(first, release_files(release))

        # Without Prefect's stored task results every stage runs again, from the LLM cache alone.
        shutil.rmtree(work / "runs" / NAME / "prefect-results")
        run_build(config, work, prefect_api)
        assert chat_received(proxy) == 0
        _same_release(first, release_files(release))


@pytest.mark.slow
def test_two_builds_sharing_one_cache(tmp_path, prefect_api):
    work = tmp_path / "work"
    with StubEndpoint() as stub, CountingProxy(stub.base_url) as proxy:
        config = write_config(tmp_path, proxy.url, concurrency=CONCURRENCY)
        runs = [BuildProcess(config, work, prefect_api, log=tmp_path / f"build-{i}.log") for i in range(2)]
        codes = [run.wait(600) for run in runs]
        # one build per work folder (issue 48): the later one is refused in one line, unless the first had ended
        assert 0 in codes and set(codes) <= {0, 2}, [run.output()[-6000:] for run in runs]
        for run, code in zip(runs, codes):
            if code == 2:
                (line,) = [ln for ln in run.output().splitlines() if ln.strip()]
                assert "in use by pid" in line, line
        db = work / "runs" / NAME / "llm_cache" / "responses.sqlite"
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            rows = con.execute("SELECT key, response FROM responses").fetchall()
        assert rows and all(json.loads(r)["text"] is not None for _, r in rows)
        first = release_files(work / "data" / "release" / NAME)

        # The shared cache is complete and readable: a third build asks nothing and writes the same release.
        proxy.reset_counts()
        shutil.rmtree(work / "runs" / NAME / "prefect-results")
        run_build(config, work, prefect_api)
        assert chat_received(proxy) == 0
        _same_release(first, release_files(work / "data" / "release" / NAME))


WRITER = textwrap.dedent("""
    import sys
    from rmb_build.core.items import Answer, PairwiseItem, Turn
    from rmb_build.pipeline.release_step import release_of
    from rmb_build.release.write import write_release
    scenarios = ["Helpfulness/Chat/Discussion", "Helpfulness/Code/Documentation", "Harmlessness/S6"]
    items = [PairwiseItem(uid=str(i), scenario_id=scenarios[i % 3],
                          conversation=(Turn("user", "question %d " % i + "x" * 2000, "English"),),
                          chosen=Answer("a", "good " * 2000), rejected=Answer("b", "bad " * 2000))
             for i in range(300)]
    print("ready", flush=True)
    while True:
        write_release(release_of("w", items), sys.argv[1])
""")


@pytest.mark.slow  # a build in a subprocess, killed and run again
def test_release_write_killed_leaves_no_half_written_file(tmp_path):
    """SIGKILL a process rewriting a ~5 MB release in a loop, at several moments: every JSON file
    there is complete (the old or the new version), only hidden temporary files may be left over."""
    target = tmp_path / "release"
    for delay in (0.05, 0.3, 0.7, 1.1):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.kill()
        proc.wait()
        proc.stdout.close()
        for f in target.rglob("*.json"):
            if not f.name.startswith("."):
                assert len(json.loads(f.read_bytes())) == 100, f
    assert len(list(target.rglob("*.json"))) >= 1
