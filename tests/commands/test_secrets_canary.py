"""Secrets, command by command: a canary planted in every secret-bearing input (an RM spec's URL user
info and query token, an endpoint's URL and API key in a config, the official release's download URL, a
release manifest's endpoints) appears in no file a command writes and in nothing it prints, and in no text
drawn into an image; the credential still reaches the endpoint. ``rmb build`` is in ``test_secrets.py``.
``push-results`` is checked on an evaluation written before evaluate redacted (parquet bytes included).

Commands run as the user runs them (``python -m rmb_build.cli -v``: debug logging on), except where the
text drawn into a heatmap is read, which needs this process; that quick test covers issue 37's path
(evaluate, its report, heatmap and score cache, the leaderboard) and the slow ones every other command."""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import matplotlib
import pytest
import yaml
from formats_helpers import Server, archive_bytes
from leaderboard_helpers import small_release
from stub_endpoint import StubEndpoint

from rmb_build.cli import main
from rmb_build.core.redact import REDACTED, redact, redact_json

CANARY = f"CANARYPASS{secrets.token_hex(6)}"
KEY = f"sk-CANARYKEY{secrets.token_hex(8)}"  # an API key in the environment, as OPENAI_API_KEY
NEEDLES = [CANARY.encode(), KEY.encode(), KEY.removeprefix("sk-").encode()]


def leaks(root: Path, printed: bytes = b"") -> list[str]:
    """Every file under ``root`` (bytes, recursively; the planted ``root/inputs`` aside) and the printed
    output that holds a canary."""
    files = [p for p in root.rglob("*") if p.is_file() and (root / "inputs") not in p.parents]
    found = [str(p) for p in files if any(n in p.read_bytes() for n in NEEDLES)]
    return found + (["<printed>"] if any(n in printed for n in NEEDLES) else [])


def rmb(env: dict, cwd: Path, *args: str, ok: bool = True) -> bytes:
    """One ``rmb -v`` command as a subprocess; returns what it printed (stdout and stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "rmb_build.cli", "-v", *args], env=env, cwd=cwd, capture_output=True, timeout=300
    )
    printed = done.stdout + done.stderr
    assert (done.returncode == 0) == ok, printed.decode(errors="replace")[-3000:]
    return printed


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "RMB_WORKDIR"}
    e.update(OPENAI_API_KEY=KEY, XDG_CACHE_HOME=str(tmp_path / "xdg"), HF_HUB_OFFLINE="1")
    return e


@pytest.fixture
def stub():
    with StubEndpoint() as s:
        yield s


def spec_urls(stub: StubEndpoint) -> dict[str, str]:
    port = stub.port
    return {
        "userinfo": f"http://user:{CANARY}@127.0.0.1:{port}/v1",
        "query": f"http://127.0.0.1:{port}/v1?api_key={CANARY}",
    }


def test_the_rule_redacts_every_credential_form_once_and_keeps_plain_values():
    for text in (
        f"openai:m@http://user:{CANARY}@h:8080/v1",
        f"openai:m@http://u:p@ss,{CANARY}@h/v1",  # a password holding "@" and ","
        f"http://h/v1?api_key={CANARY}",
        f"http://h/v1#access_token={CANARY}",
        f"hf:org/model?token={CANARY}",
        f"Authorization: Bearer {CANARY}",
        f"x-api-key: {CANARY}",
        f"{{'Authorization': 'Bearer {CANARY}'}}",  # a dict's repr in a log line
        f'{{"api-key": "{CANARY}", "n": 1}}',
        f"password={CANARY}&next=1",
        f"--key sk-{CANARY}",
        f"hf_{CANARY}",
    ):
        out = redact(text)
        assert CANARY not in out and REDACTED in out and redact(out) == out, text
    assert redact(f"openai:judge@http://u:{CANARY}@host/v1") == f"openai:judge@http://{REDACTED}@host/v1"
    for plain in ("openai:gpt-4o@http://127.0.0.1:8080/v1", "hf:./runs/skywork-rm", "Helpfulness/Chat/Discussion"):
        assert redact(plain) == plain
    obj = {"api_key": CANARY, "api_key_env": "OPENAI_API_KEY", "urls": [f"http://u:{CANARY}@h"], "n": 3}
    assert redact_json(obj) == {
        "api_key": REDACTED,
        "api_key_env": "OPENAI_API_KEY",
        "urls": [f"http://{REDACTED}@h"],
        "n": 3,
    }


@pytest.mark.slow  # subprocesses and local servers, tens of seconds
def test_evaluate_leaderboard_compare_write_only_the_redacted_spec(tmp_path, env, stub):
    """Issue 37: the password of ``--rm openai:judge@http://user:PASS@host/v1`` was in results.json,
    report.md, the score cache and the leaderboard's pages and their file names."""
    release = small_release(tmp_path / "release")
    urls = spec_urls(stub)
    printed = b""
    for name, url in urls.items():
        printed += rmb(
            env, tmp_path, "evaluate", "--release", str(release), "--rm", f"openai:judge@{url}",
            "--out", str(tmp_path / f"eval-{name}"), "--cache", str(tmp_path / "cache"),
            "--bootstrap", "50", "--no-progress",
        )  # fmt: skip
    basic = "Basic " + base64.b64encode(f"user:{CANARY}".encode()).decode()
    assert any(h.get("Authorization") == basic for h in stub.headers)  # the password was really used
    results = json.loads((tmp_path / "eval-userinfo" / "results.json").read_text())
    assert results["rm"] == f"openai:judge@http://{REDACTED}@127.0.0.1:{stub.port}/v1"
    assert f"`{results['rm']}`" in (tmp_path / "eval-userinfo" / "report.md").read_text()
    folders = [str(tmp_path / f"eval-{n}") for n in urls]
    printed += rmb(env, tmp_path, "leaderboard", *folders, "--out", str(tmp_path / "site"))
    printed += rmb(env, tmp_path, "compare", *folders, "--json", str(tmp_path / "compare.json"), "--resamples", "200")
    pages = sorted(p.name for p in (tmp_path / "site" / "rm").glob("*.html"))
    assert len(pages) == 2 and all("canary" not in p.lower() for p in pages), pages
    assert leaks(tmp_path, printed) == []


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_a_credential_in_a_failing_rm_spec_is_not_printed(tmp_path, env):
    release = small_release(tmp_path / "release")
    for spec in (
        f"openai:@http://u:{CANARY}@127.0.0.1:9/v1",
        f"nosuchkind:http://u:{CANARY}@h/v1?token={CANARY}",
        f"openai:judge@http://u:{CANARY}/x@127.0.0.1:9/v1",  # a "/" in the password: the URL does not parse
    ):
        printed = rmb(env, tmp_path, "evaluate", "--release", str(release), "--rm", spec, "--out",
                      str(tmp_path / "out"), "--no-progress", ok=False)  # fmt: skip
        assert b"error:" in printed and leaks(tmp_path, printed) == [], printed.decode()


class _DrawnText:
    """Every text of every figure saved while it is active (titles, labels, cell texts)."""

    def __init__(self, monkeypatch):
        from matplotlib.figure import Figure
        from matplotlib.text import Text

        self.texts: list[str] = []
        save = Figure.savefig

        def spy(fig, *args, **kwargs):
            self.texts += [t.get_text() for t in fig.findobj(Text)]
            return save(fig, *args, **kwargs)

        monkeypatch.setattr(Figure, "savefig", spy)


@pytest.mark.draws_heatmaps
def test_text_drawn_into_heatmaps_holds_no_credential(tmp_path, monkeypatch, capsys, stub, env):
    """The heatmap's title is made from the RM spec: evaluate's, and the leaderboard's from a results.json
    written before evaluate redacted its spec (its pages, their names and the copied results.json too)."""
    matplotlib.use("Agg")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    drawn = _DrawnText(monkeypatch)
    release = small_release(tmp_path / "release")
    spec = f"openai:judge@{spec_urls(stub)['userinfo']}"
    out = tmp_path / "eval"
    args = ["evaluate", "--release", str(release), "--rm", spec, "--out", str(out), "--no-progress"]
    assert main([*args, "--cache", str(tmp_path / "cache"), "--bootstrap", "50"]) == 0
    assert any(t.startswith(f"openai:judge@http://{REDACTED}@") for t in drawn.texts)
    old = json.loads((out / "results.json").read_text())
    old["rm"] = spec  # as evaluate wrote it before
    (out / "results.json").write_text(json.dumps(old))
    drawn.texts.clear()
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "site")]) == 0
    assert drawn.texts and not [t for t in drawn.texts if CANARY in t]
    (out / "results.json").unlink()  # the planted file itself
    printed = capsys.readouterr()
    assert leaks(tmp_path, (printed.out + printed.err).encode()) == []


def test_push_results_writes_and_prints_no_credential(tmp_path, capsys):
    """An evaluation written before evaluate redacted its spec (the password in ``rm`` and ``command``, a
    token in a prediction's line): ``push-results --dry-run`` writes and prints none of them."""
    release = small_release(tmp_path / "release")
    out = tmp_path / "inputs" / "eval"
    args = ["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(out), "--no-progress"]
    assert main([*args, "--bootstrap", "50"]) == 0
    results = json.loads((out / "results.json").read_text())
    results["rm"] = f"openai:judge@http://user:{CANARY}@127.0.0.1:9/v1"
    results["command"] += f" --rm openai:judge@http://127.0.0.1:9/v1?api_key={CANARY}"
    (out / "results.json").write_text(json.dumps(results))
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    rows[0]["error"] = f"401 for http://127.0.0.1:9/v1 with Authorization: Bearer {KEY}"
    (out / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    hf = tmp_path / "hf"
    assert main(["push-results", str(out), "--repo-id", "org/canary", "--dry-run", "--out", str(hf)]) == 0
    written = json.loads((hf / "results.json").read_text())
    assert written["rm"] == f"openai:judge@http://{REDACTED}@127.0.0.1:9/v1"
    assert REDACTED in (hf / "README.md").read_text()
    printed = capsys.readouterr()
    assert leaks(tmp_path, (printed.out + printed.err).encode()) == []


@pytest.mark.slow  # subprocesses and local servers, tens of seconds
def test_downstream_and_judge_check_with_credentials_in_their_configs(tmp_path, env, stub):
    """An endpoint whose URL carries user:password and whose key comes from the environment, named by the
    policy, the grader and an RM: downstream's outputs, its caches and the console show neither; nor do
    ``judge-check``'s."""
    env = {**env, "RMB_CANARY_KEY": KEY}
    release = small_release(tmp_path / "release")
    ep = {"base_url": spec_urls(stub)["userinfo"], "api_key_env": "RMB_CANARY_KEY"}
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": str(i), "prompt": f"Question {i}: why?"}) + "\n" for i in range(3)))
    downstream = {
        "name": "canary",
        "endpoints": {"stub": ep},
        "prompts": {
            "sources": [{"kind": "jsonl", "path": str(prompts)}],
            "default_scenario": "Helpfulness/Chat/Discussion",
            "holdout": {"releases": []},
        },
        "policy": {"endpoint": "stub", "model": "policy", "n": 2, "temperature": 0.8, "max_tokens": 32},
        "grader": {"kind": "pointwise", "endpoint": "stub", "model": "grader"},
        "reward_models": ["openai:judge@stub", "baseline:length"],
        "bootstrap": {"resamples": 100},
    }
    config = tmp_path / "inputs" / "downstream.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(downstream))
    work = tmp_path / "work"
    printed = rmb(env, tmp_path, "downstream", "--config", str(config), "--workdir", str(work), "--dry-run")
    printed += rmb(env, tmp_path, "downstream", "--config", str(config), "--workdir", str(work),
                   "--out", str(tmp_path / "ds"), "--no-progress")  # fmt: skip
    result = json.loads((tmp_path / "ds" / "downstream.json").read_text())
    assert set(result["rms"]) == {"openai:judge@stub", "baseline:length"}

    build = {
        "name": "canary",
        "license": "CC0-1.0",
        "endpoints": {"stub": ep},
        "sources": [{"kind": "jsonl", "path": str(prompts), "license": "CC0-1.0"}],
        "generators": [{"endpoint": "stub", "model": "gen", "name": "gen"}],
        "judge": {"endpoint": "stub", "model": "judge"},
        "guard": {"endpoint": "stub", "model": "guard"},
        "min_generators": 1,
    }
    config = tmp_path / "inputs" / "build.yaml"
    config.write_text(yaml.safe_dump(build))
    stub.reset()
    printed += rmb(env, tmp_path, "judge-check", "--config", str(config), "--gold", str(release), "--items", "6",
                   "--workdir", str(work), "--json", str(tmp_path / "gold.json"))  # fmt: skip
    basic = "Basic " + base64.b64encode(f"user:{CANARY}".encode()).decode()
    assert stub.headers and all(h.get("Authorization") == basic for h in stub.headers)
    assert leaks(tmp_path, printed) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # subprocesses and local servers, tens of seconds
def test_official_release_url_token_and_a_manifest_with_credentials(tmp_path, env):
    """``--release rmb`` downloads from ``$RMB_RELEASE_URL`` (a signed link: its token in the query):
    evaluate's results, the cached source.json, review's database and export hold no token. A release
    whose manifest (hand-made, or from an older build) names endpoints with credentials: ``publish
    --dry-run`` writes the manifest and card redacted."""
    with Server(archive_bytes(tmp_path)) as server:
        env = {**env, "RMB_RELEASE_URL": f"{server.url}?X-Amz-Signature={CANARY}&token={CANARY}"}
        printed = rmb(env, tmp_path, "evaluate", "--release", "rmb", "--rm", "baseline:length", "--out",
                      str(tmp_path / "eval"), "--bootstrap", "50", "--no-progress")  # fmt: skip
    assert server.requests == 1
    source = json.loads(next((tmp_path / "xdg").rglob("source.json")).read_text())
    assert source["url"] == f"{server.url}?{REDACTED}"

    port, db = _free_port(), tmp_path / "review.db"
    serve = subprocess.Popen(
        [sys.executable, "-m", "rmb_build.cli", "review", "serve", "rmb", "--db", str(db), "--annotator", "ann",
         "--annotator", "bob", "--port", str(port)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and serve.poll() is None:
            lines.append(serve.stdout.readline())
            if lines[-1].startswith(b"keys:"):
                break
        assert lines and lines[-1].startswith(b"keys:"), b"".join(lines).decode()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    printed += b"".join(lines) + serve.stdout.read()
    printed += rmb(env, tmp_path, "review", "export", "--db", str(db), "--out", str(tmp_path / "export"))

    rel = small_release(tmp_path / "release")
    manifest = json.loads((rel / "manifest.json").read_text())
    manifest.update(
        license="CC0-1.0",
        config={"endpoints": {"x": {"base_url": f"http://u:{CANARY}@h/v1?api_key={CANARY}", "api_key": CANARY}}},
        sources=[{"kind": "jsonl", "path": f"https://h/prompts.jsonl?token={CANARY}", "license": "CC0-1.0"}],
    )
    (rel / "manifest.json").write_text(json.dumps(manifest))
    printed += rmb(env, tmp_path, "publish", str(rel), "--repo-id", "org/canary", "--dry-run",
                   "--out", str(tmp_path / "hf"), "--no-embeddings")  # fmt: skip
    written = json.loads((tmp_path / "hf" / "manifest.json").read_text())
    assert written["config"]["endpoints"]["x"] == {
        "base_url": f"http://{REDACTED}@h/v1?{REDACTED}",
        "api_key": REDACTED,
    }
    (rel / "manifest.json").unlink()  # the planted input itself
    assert leaks(tmp_path, printed) == []
