"""Helpers of the benchmark-format tests: a scorer whose scores the test writes into the answers, and
writers for the formats' files.

An answer ``"3.5|some text"`` scores 3.5 under ``python:<this file>:score``.
"""

from __future__ import annotations

import http.server
import io
import json
import threading
import zipfile
from pathlib import Path

from rmb_build.cli import main
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release

SCORER = f"python:{Path(__file__).resolve()}:score"


def score(conversation, answer):
    return float(answer.split("|", 1)[0])


def ans(value: float, label: str) -> str:
    """An answer text that ``score`` scores ``value``."""
    return f"{value}|{label}"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_json(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def evaluate(tmp_path: Path, release: Path | str, *extra: str, out: str = "out") -> dict:
    """``rmb evaluate`` with the test scorer; returns results.json (the command must succeed)."""
    code = main(
        [
            "evaluate",
            "--release",
            str(release),
            "--rm",
            SCORER,
            "--out",
            str(tmp_path / out),
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
            "--bootstrap",
            "20",
            *extra,
        ]
    )
    assert code == 0
    return json.loads((tmp_path / out / "results.json").read_text(encoding="utf-8"))


def evaluate_error(tmp_path: Path, release: Path | str, capsys, *extra: str) -> str:
    """``rmb evaluate`` that must fail as a user error: exit 2, one line on stderr, no results; returns the line."""
    capsys.readouterr()
    code = main(
        [
            "evaluate",
            "--release",
            str(release),
            "--rm",
            SCORER,
            "--out",
            str(tmp_path / "bad-out"),
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
            "--bootstrap",
            "20",
            *extra,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert not (tmp_path / "bad-out" / "results.json").exists()
    return err.strip()


# --- the official release's archive, served locally (RMB_RELEASE_URL points here in offline tests) ---

TOP = "RMB-Reward-Model-Benchmark-main"


def archive_bytes(tmp_path: Path) -> bytes:
    """A zip laid out as the repository's archive: RMB_dataset/ one folder down, beside other files."""
    rel = Release(name="tiny", root=None)
    q = (Turn("user", "Hi", "en"),)
    rel.add(PairwiseItem("0", q, Answer("m1", "2|hello there"), Answer("m2", "1|hi"), "Helpfulness/Chat/Discussion"))
    rel.add(PairwiseItem("1", q, Answer("m1", "1|short"), Answer("m2", "3|longer"), "Harmlessness/S6"))
    rel.add(
        BonItem("0", q, Answer("m1", "2|hello there"), (Answer("m2", "1|hi"), Answer("m3", "0|hey")), "Harmlessness/S6")
    )
    write_release(rel, tmp_path / "src")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{TOP}/README.md", "the repository's readme")
        for file in sorted((tmp_path / "src").rglob("*.json")):
            zf.write(file, f"{TOP}/RMB_dataset/{file.relative_to(tmp_path / 'src').as_posix()}")
    return buf.getvalue()


class Server:
    """A local HTTP server in a thread serving ``body`` at /archive.zip and counting requests."""

    def __init__(self, body: bytes, declared_length: int | None = None):
        self.body, self.requests = body, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(declared_length or len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/archive.zip"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
