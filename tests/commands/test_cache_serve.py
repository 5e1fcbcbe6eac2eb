"""``rmb cache stats|prune`` and ``rmb serve``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from rmb_build.cli import main
from rmb_build.llm import ResponseCache


@pytest.fixture
def filled(tmp_path, monkeypatch):
    cache_dir = tmp_path / "runs" / "demo" / "llm_cache"
    now = time.time()
    clock = [now - 40 * 86400]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    with ResponseCache(cache_dir) as cache:
        cache.put(
            "a", {"text": "x"}, endpoint="embedded:smollm2", endpoint_name="local", model="smollm2", stage="generate"
        )
        clock[0] = now - 5 * 86400
        cache.put("b", {"text": "y"}, endpoint="https://api/v1", endpoint_name="openai", model="gpt-x", stage="judge")
        cache.put("c", {"text": "z"}, endpoint="https://api/v1", endpoint_name="openai", model="gpt-y", stage="judge")
    monkeypatch.undo()
    return cache_dir


def test_cache_stats(filled, tmp_path, capsys):
    assert main(["cache", "stats", "--name", "demo", "--workdir", str(tmp_path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["rows"] == 3 and stats["by_stage"] == {"judge": 2, "generate": 1}
    assert stats["oldest"] < stats["newest"] and stats["by_endpoint_name"]["openai"] == 2
    assert main(["cache", "stats", "--cache", str(filled)]) == 0
    out = capsys.readouterr().out
    assert "3 responses" in out and re.search(r"gpt-x\s+1", out)


def test_cache_prune(filled, capsys):
    assert main(["cache", "prune", "--cache", str(filled), "--older-than", "10"]) == 0
    assert "deleted 1 cached responses; 2 left" in capsys.readouterr().out
    assert (
        main(
            ["cache", "prune", "--cache", str(filled / "responses.sqlite"), "--endpoint", "openai", "--model", "gpt-y"]
        )
        == 0
    )
    assert "deleted 1 cached responses; 1 left" in capsys.readouterr().out
    # No filter is refused (one line, exit 2) rather than emptying a months-old cache by accident.
    assert main(["cache", "prune", "--cache", str(filled)]) == 2
    assert "no filter given" in capsys.readouterr().err
    assert main(["cache", "prune", "--cache", str(filled), "--all"]) == 0
    assert "0 left" in capsys.readouterr().out


def test_cache_missing_is_one_clear_line(tmp_path, capsys):
    assert main(["cache", "stats", "--cache", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "responses.sqlite: no LLM cache here" in err
    assert not (tmp_path / "nothing").exists()


@pytest.mark.slow
def test_serve_runs_until_interrupted(tmp_path):
    log = tmp_path / "serve.log"
    # stderr to a file: a pipe nobody reads can fill up and block the process it should watch
    err = open(tmp_path / "stderr.txt", "w")
    # Ctrl-C's disposition as a terminal gives it: a suite started in the background (as a CI job may
    # be) passes SIGINT on as ignored, and Python then installs no KeyboardInterrupt handler
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmb_build.cli", "serve", "--n-ctx", "512", "--log", str(log)],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line).group(1)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/models", timeout=10) as resp:
            assert json.load(resp)["data"][0]["id"] == "smollm2"
        assert "Ctrl-C stops it" in proc.stdout.readline()  # past start-up, in the serving loop
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)  # the server gets SIGTERM, then SIGKILL 5 s later: well within this
        except subprocess.TimeoutExpired:
            raise AssertionError(
                "rmb serve did not stop on Ctrl-C; its stderr:\n" + (tmp_path / "stderr.txt").read_text()[-3000:]
            ) from None
        assert code == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        err.close()
    with pytest.raises(OSError):
        opener.open(url + "/models", timeout=5)
    assert log.stat().st_size > 0
