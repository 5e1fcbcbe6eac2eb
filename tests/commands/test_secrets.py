"""Secrets: a build and an evaluation run with a recognisable fake API key in the environment; the key
reaches the endpoint (it is really used) and appears in no file the toolkit writes: LLM and score
caches, Prefect's database and results, logs, the run summary, failures, the release and its
manifest, the evaluation's results and reports, and the console output."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import NAME, QUERIES, CountingProxy, run_build, write_config
from stub_endpoint import StubEndpoint

pytestmark = pytest.mark.slow

HELPFUL = [q for q in QUERIES if q[2].startswith("Helpfulness/")]  # 3 queries x 2 generators: 12 LLM calls


def files_holding(root: Path, needles: list[bytes]) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


def test_api_key_is_never_written(tmp_path):
    key = f"sk-rmbtest-SECRET-{secrets.token_hex(12)}"
    work = tmp_path / "work"
    # No shared Prefect server here: the build starts its own, its home (database, logs) under work/runs.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "PREFECT_HOME"}
    env.update(OPENAI_API_KEY=key, HF_HUB_OFFLINE="1", PREFECT_LOGGING_LEVEL="DEBUG")
    with StubEndpoint() as stub, CountingProxy(stub.base_url) as proxy:  # about our files, not the model
        config = write_config(tmp_path, proxy.url, queries=HELPFUL, api_key_env="OPENAI_API_KEY")
        run_build(config, work, "", env=env, timeout=600)
        release = work / "data" / "release" / NAME
        ev = subprocess.run(
            [
                sys.executable,
                "-m",
                "rmb_build.cli",
                "-v",
                "evaluate",
                "--release",
                str(release),
                "--rm",
                "openai:smollm2@proxy",
                "--config",
                str(config),
                "--out",
                str(work / "eval"),
                "--workdir",
                str(work),
                "--bootstrap",
                "20",
                "--no-progress",
            ],
            env=env,
            capture_output=True,
            cwd=work,
            timeout=600,
        )
        assert ev.returncode == 0, ev.stderr.decode()[-4000:]
        (work / "evaluate.log").write_bytes(ev.stdout + ev.stderr)
    assert proxy.authorization[f"Bearer {key}"] == sum(proxy.sent.values()) > 0  # the key was really used
    assert (work / "eval" / "results.json").exists() and (work / "runs" / ".prefect").is_dir()
    written = [p for p in work.rglob("*") if p.is_file()]
    assert any(p.suffix in (".sqlite", ".db") for p in written) and len(written) > 10
    # The key as a whole, and its distinctive part alone (a log that masks only the prefix still leaks).
    assert files_holding(work, [key.encode(), key.removeprefix("sk-").encode()]) == []


def test_credentials_in_an_endpoint_url_are_never_written(tmp_path):
    """A key in the endpoint's URL (user:password) and one in an environment variable: a real
    ``rmb build`` on a stub endpoint writes neither anywhere under its workdir (Prefect's own
    database and logs, the LLM cache, run state, release and manifest)."""
    import base64
    import json

    import yaml
    from stub_endpoint import StubEndpoint

    from rmb_build.stages.generate import assumed_answer

    url_key, env_key = "SECRETKEY123", f"sk-rmbtest-ENV-{secrets.token_hex(12)}"
    prompts = [
        ("s1", "Write a two-line poem about the sea.", "Helpfulness/Generation/Creative Writing"),
        ("s2", "How do I sort a list of numbers in Python?", "Helpfulness/Code/Development and Implementation"),
    ]

    def reply(body: dict) -> str:
        if body["model"] == "judge":  # the long answer wins, so pairs can be built
            return json.dumps({"rationale": "ok", "score": 9 if "word " * 10 in body["messages"][-1]["content"] else 2})
        if body["model"] == "clf":
            return json.dumps({"scenario": "Helpfulness/Open QA/Factual", "confidence": 0.9})
        return assumed_answer(body["max_tokens"])

    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "PREFECT_HOME"}
    env.update(RMB_TEST_KEY=env_key, HF_HUB_OFFLINE="1", PREFECT_LOGGING_LEVEL="DEBUG")
    env.pop("RMB_WORKDIR", None)
    with StubEndpoint(reply=reply) as stub:
        source = tmp_path / "queries.jsonl"
        source.write_text("".join(json.dumps({"id": i, "prompt": p, "scenario": s}) + "\n" for i, p, s in prompts))
        ep = {"base_url": f"http://user:{url_key}@127.0.0.1:{stub.port}/v1", "api_key_env": "RMB_TEST_KEY"}
        config = {
            "name": "secret",
            "license": "CC0-1.0",
            "endpoints": {"stub": ep},
            "sources": [{"kind": "jsonl", "path": str(source), "license": "CC0-1.0"}],
            "classifier": {"method": "llm", "endpoint": "stub", "model": "clf"},
            "generators": [
                {"endpoint": "stub", "model": "gen", "name": "short", "max_tokens": 4},
                {"endpoint": "stub", "model": "gen", "name": "long", "max_tokens": 20},
            ],
            "judge": {"endpoint": "stub", "model": "judge"},
            "guard": {"endpoint": "stub", "model": "guard"},
            "sets": {"margin": 0.0, "min_losers": 1},
            "min_generators": 1,
        }
        path = tmp_path / "secret.yaml"
        path.write_text(yaml.safe_dump(config))
        build = subprocess.run(
            [sys.executable, "-m", "rmb_build.cli", "-v", "build", "--config", str(path), "--workdir", str(work)],
            env=env,
            capture_output=True,
            cwd=tmp_path,
            timeout=600,
        )
        (work / "build.log").write_bytes(build.stdout + build.stderr)
        assert build.returncode == 0, build.stderr.decode()[-4000:]
    # The URL's credentials were really used (httpx sends them as Basic auth, in place of the bearer key).
    basic = "Basic " + base64.b64encode(f"user:{url_key}".encode()).decode()
    assert stub.bodies and all(h.get("Authorization") == basic for h in stub.headers)
    written = [p for p in work.rglob("*") if p.is_file()]
    assert (work / "runs" / ".prefect").is_dir() and any(p.suffix == ".db" for p in written)
    assert (work / "data" / "release" / "secret" / "manifest.json").exists()
    needles = [url_key, basic.removeprefix("Basic "), env_key, env_key.removeprefix("sk-")]
    assert files_holding(work, [n.encode() for n in needles]) == []
