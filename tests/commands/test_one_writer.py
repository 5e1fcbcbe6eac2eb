"""Issue 48's attacks on what a command keeps and who writes where, kept as tests: ``audit --fix`` drops
nothing of the release it copies (``Style_set/``, other files); one writer per output folder (evaluate,
audit, ...), per build work folder and per review database, the second refused in one line naming the
first. The attacks with real builds, servers or several processes at once are slow."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import NAME, BuildProcess, write_config
from review_helpers import small_release as review_release
from stub_endpoint import StubEndpoint
from style_helpers import style_records, write_style_release

from rmb_build.cli import main


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _style_release(root: Path, identical: str | None = None) -> Path:
    """A release with ``Style_set/``, an ``audit.json`` and a card; ``identical``: the uid of an item whose
    two answers are made the same (an identical_pair defect, which --fix removes)."""
    records = style_records(np.random.default_rng(3), per_scenario=3)
    if identical is not None:
        for recs in records.values():
            for rec in recs:
                if rec["id"] == identical:
                    rec["rejected"][0] = rec["chosen"][0]
    write_style_release(root, records)
    (root / "audit.json").write_text('{"built": "audit"}\n')
    (root / "README.md").write_text("# my card\n")
    return root


def test_audit_fix_keeps_style_set_and_every_other_file_byte_for_byte(tmp_path, capsys):
    """Issue 48: the clean copy had no Style_set/ ("removed 0 items", exit 0) and no other file of the
    release: evaluating it gave no style figures."""
    release = _style_release(tmp_path / "rel")
    fixed = tmp_path / "fixed"
    assert main(["audit", str(release), "--fix", str(fixed), "--no-embeddings"]) == 0
    before, after = _files(release), _files(fixed)
    for rel in [r for r in before if r.startswith("Style_set/")] + ["audit.json", "README.md"]:
        assert after.get(rel) == before[rel], rel
    line = capsys.readouterr().out.splitlines()[-1]
    assert "removed 0 items" in line and "carried Style_set/ (3 byte for byte)" in line, line
    assert "audit.json" in line and "README.md" in line
    carried = json.loads(after["manifest.json"])["audit_fix"]["carried"]
    assert carried["style_records_removed"] == 0 and "Style_set/Harmlessness/S6.json" in carried["copied"]


def test_audit_fix_drops_the_style_records_of_removed_items_and_says_so(tmp_path, capsys):
    release = _style_release(tmp_path / "rel", identical="4")  # in the second scenario's file
    fixed = tmp_path / "fixed"
    assert main(["audit", str(release), "--fix", str(fixed), "--no-embeddings"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert "removed 1 items" in line and "1 records of removed items dropped" in line, line
    before, after = _files(release), _files(fixed)
    rewritten = "Style_set/Helpfulness/Code/Documentation.json"
    assert [r["id"] for r in json.loads(after[rewritten])] == ["3", "5"]
    for rel in [r for r in before if r.startswith("Style_set/") and r != rewritten]:
        assert after[rel] == before[rel], rel
    assert json.loads(after["manifest.json"])["audit_fix"]["carried"]["rewritten"] == [rewritten]
    # the copy is a release evaluate reads whole (every style record still has its item) and scores styles
    ev = ["evaluate", "--release", str(fixed), "--rm", "baseline:length", "--out", str(tmp_path / "ev")]
    assert main([*ev, "--cache", str(tmp_path / "c"), "--no-progress", "--bootstrap", "20"]) == 0
    assert len((tmp_path / "ev" / "style_predictions.jsonl").read_text().splitlines()) == 8


def test_audit_fix_leaves_out_the_style_records_evaluate_refuses_and_the_copy_evaluates(tmp_path, capsys):
    """An orphan record, a repeated id and a file of an unknown scenario: the audit counts them and evaluate
    refuses the release; the cleaned copy drops those records (and a file left empty) and evaluates."""
    release = _style_release(tmp_path / "rel")
    s6 = release / "Style_set/Harmlessness/S6.json"
    records = json.loads(s6.read_text())
    orphan = {**records[0], "id": "999"}
    s6.write_text(json.dumps([*records, orphan, dict(records[0])], indent=1))
    unknown = release / "Style_set/Helpfulness/Chat/Nonsense.json"
    unknown.write_text(json.dumps([{**records[0], "scenario": "Helpfulness/Chat/Nonsense"}], indent=1))
    ev = ["evaluate", "--rm", "baseline:length", "--cache", str(tmp_path / "c"), "--no-progress", "--bootstrap", "20"]
    assert main([*ev, "--release", str(release), "--out", str(tmp_path / "ev0")]) == 2
    capsys.readouterr()
    fixed = tmp_path / "fixed"
    assert main(["audit", str(release), "--fix", str(fixed), "--no-embeddings"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert "3 records 'rmb evaluate' refuses dropped" in line and "1 dropped" in line, line
    assert not (fixed / "Style_set/Helpfulness/Chat/Nonsense.json").exists()
    assert json.loads((fixed / "Style_set/Harmlessness/S6.json").read_text()) == records
    carried = json.loads((fixed / "manifest.json").read_text())["audit_fix"]["carried"]
    assert carried["style_records_unusable"] == 3 and carried["dropped"] == ["Style_set/Helpfulness/Chat/Nonsense.json"]
    assert main([*ev, "--release", str(fixed), "--out", str(tmp_path / "ev")]) == 0


# A child that holds the lock of argv[1] (as a first writer would) until killed.
HOLDER = """
import sys, time
from rmb_build.core import lock
with lock.hold_out(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def _holder(path: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def _stop(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()


def test_an_evaluate_into_an_out_another_writes_is_refused_in_one_line(tmp_path, capsys):
    release = _style_release(tmp_path / "rel")
    out = tmp_path / "ev"
    first = _holder(out)
    try:
        args = ["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(out)]
        assert main([*args, "--cache", str(tmp_path / "c"), "--no-progress"]) == 2
    finally:
        _stop(first)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}: in use by pid {first.pid} on {socket.gethostname()}" in err
    assert not out.exists()


def test_a_second_review_serve_on_one_database_is_refused_in_one_line(tmp_path, capsys):
    """Issue 48: the second server crashed with a raw sqlite3.IntegrityError traceback."""
    release = review_release(tmp_path / "rel")
    db = tmp_path / "review.db"
    first = _holder(db)  # what a running 'rmb review serve --db review.db' holds
    try:
        assert main(["review", "serve", str(release), "--db", str(db), "--annotator", "ann", "--port", "1"]) == 2
    finally:
        _stop(first)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--db {db}: in use by pid {first.pid}" in err and "review serve" in err
    assert not db.exists()


def _evaluate(release: Path, out: Path, cache: Path, scorer: Path) -> subprocess.Popen:
    cmd = ["evaluate", "--release", str(release), "--rm", f"python:{scorer}:score", "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, "-m", "rmb_build.cli", *cmd, "--cache", str(cache), "--no-progress", "--bootstrap", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow  # three evaluate processes
def test_three_evaluates_into_one_out_at_once_leave_one_whole_output(tmp_path):
    """Issue 48: two ``evaluate --out SAME`` both printed "wrote" (the last won, past the --overwrite rule);
    about 1% of concurrent swaps failed with a raw OSError. Now one writes; the others refuse in one line."""
    release = _style_release(tmp_path / "rel")
    scorer = tmp_path / "slow_scorer.py"
    scorer.write_text("import time\n\ndef score(conversation, answer):\n    time.sleep(0.05)\n    return len(answer)\n")
    out = tmp_path / "ev"
    runs = [_evaluate(release, out, tmp_path / f"cache{i}", scorer) for i in range(3)]
    done = [(r.wait(300), *r.communicate()) for r in runs]
    wrote = [o for rc, o, _ in done if rc == 0]
    refused = [e for rc, _, e in done if rc == 2]
    assert len(wrote) == 1 and "wrote" in wrote[0] and len(refused) == 2, done
    for err in refused:  # the lock, or, where the first had ended already, the --overwrite rule
        assert err.count("\n") == 1 and ("in use by pid" in err or "--overwrite" in err), err
    assert sorted(p.name for p in out.iterdir()) == [
        "heatmap.png",
        "predictions.jsonl",
        "report.md",
        "results.json",
        "style_predictions.jsonl",
    ]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".ev.")]  # no hidden folder, no lock


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # starts a review server
def test_a_second_review_server_on_one_database_refuses_and_the_first_serves_on(tmp_path):
    release = review_release(tmp_path / "rel")
    db, port = tmp_path / "review.db", _free_port()
    serve = [sys.executable, "-m", "rmb_build.cli", "review", "serve", str(release), "--db", str(db)]
    log = tmp_path / "first.log"
    with open(log, "wb") as fh:
        first = subprocess.Popen([*serve, "--annotator", "ann", "--port", str(port)], stdout=fh, stderr=fh)
    try:
        deadline = time.monotonic() + 120
        while "Ctrl-C stops" not in log.read_text():
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        second = subprocess.run(
            [*serve, "--annotator", "ann", "--port", str(_free_port())], capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1 and f"in use by pid {first.pid}" in second.stderr, second.stderr
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:  # the first serves on
            conn.sendall(f"GET /a/ann HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            assert conn.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(60)


@pytest.mark.slow  # two builds through the stub endpoint
def test_two_builds_on_one_work_folder_send_no_more_requests_than_one(tmp_path):
    """Issue 48: two builds on one --workdir at once sent 1,486 requests where one sends 792, and usage.json
    recorded 792. The second is refused in one line naming the first; every request sent is counted."""
    work = tmp_path / "work"
    with StubEndpoint() as stub:
        config = write_config(tmp_path, stub.base_url)
        stub.hold("generate", after=1)  # the first build is under way when the second starts
        first = BuildProcess(config, work, "", args=["--runner", "local"])
        deadline = time.monotonic() + 300
        while stub.count("generate") < 1:
            assert first.proc.poll() is None and time.monotonic() < deadline, first.output()[-4000:]
            time.sleep(0.05)
        second = BuildProcess(config, work, "", args=["--runner", "local"], log=tmp_path / "second.log")
        try:
            rc = second.proc.wait(120)
        except subprocess.TimeoutExpired:
            rc = None  # it went on building (held by the stub, as the first is)
        stub.release()
        if rc is None:
            second.wait(400)
        assert first.wait(400) == 0, first.output()[-4000:]
        assert rc == 2, second.output()[-4000:]
        lines = [ln for ln in second.output().splitlines() if ln.strip()]
        assert len(lines) == 1 and f"work folder {work / 'runs' / NAME}" in lines[0], lines
        assert f"in use by pid {first.proc.pid} on {socket.gethostname()}" in lines[0]
        usage = json.loads((work / "runs" / NAME / "usage.json").read_text())
        counted = sum(row["requests"] for models in usage.values() for row in models.values())
        assert counted == stub.count() > 0
        assert not (work / "runs" / NAME / "build.lock").exists()
