"""Does "Show all" on a 2 MB review item hold up another annotator, or the server's memory?

A release of two pairwise items, one answering with a Markdown table of ``--chars`` characters, is served
by ``rmb review serve`` in its own process (two annotators, one item each). While
``ann`` asks for all of the long item, ``bob`` fetches his page every 0.1 s; the bench prints the time
"Show all" took, bob's slowest page during it, and the server's peak RSS (VmHWM). Run it with the Python
of each checkout to compare (the figures of one run go in bench/README.md).

Usage: python bench/review_show_all.py [--chars 2000000]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release


def table(chars: int) -> str:
    rows = [f"| {i} | cell {i} | {i * 7} |\n" for i in range(chars // 24)]
    return "| row | name | value |\n| --- | --- | --- |\n" + "".join(rows)


def write(root: Path, chars: int) -> None:
    rel = Release(name="show-all", root=None)
    for uid, text in (("0", "Here:\n\n" + table(chars)), ("1", "A short answer.")):
        conv = (Turn("user", f"Question {uid}?", "en"),)
        rel.add(PairwiseItem(uid, conv, Answer("a", text), Answer("b", "No."), "Helpfulness/Chat/Discussion"))
    write_release(rel, root)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 600) -> tuple[float, str]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read().decode()
    return time.perf_counter() - t0, body


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=2_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root / "rel", args.chars)
        port = free_port()
        cmd = [sys.executable, "-m", "rmb_build.cli", "review", "serve", str(root / "rel"), "--overlap", "0"]
        cmd += ["--db", str(root / "review.db"), "--annotator", "ann", "--annotator", "bob", "--port", str(port)]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    get(base + "/", 2)
                    break
                except OSError:
                    time.sleep(0.1)
            # whoever is shown the long item first asks for all of it; the other keeps fetching his page
            first = {n: "Here:" in get(f"{base}/a/{n}")[1] for n in ("ann", "bob")}
            long_one = next((n for n, has in first.items() if has), "ann")
            other = "bob" if long_one == "ann" else "ann"
            idle_rss = peak_rss_mb(server.pid)
            waits: list[float] = []
            done = threading.Event()

            def poll() -> None:
                while not done.is_set():
                    waits.append(get(f"{base}/a/{other}")[0])
                    time.sleep(0.1)

            poller = threading.Thread(target=poll)
            poller.start()
            took, body = get(f"{base}/a/{long_one}?all=1")
            done.set()
            poller.join()
            rows = {
                "chars": args.chars,
                "show_all_s": round(took, 2),
                "page_bytes": len(body),
                "other_pages": len(waits),
                "other_slowest_s": round(max(waits), 3),
                "other_median_s": round(sorted(waits)[len(waits) // 2], 3),
                "server_rss_before_mb": round(idle_rss),
                "server_peak_rss_mb": round(peak_rss_mb(server.pid)),
            }
        finally:
            server.terminate()
            server.wait(30)
    for k, v in rows.items():
        print(f"{k:>22}  {v}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
