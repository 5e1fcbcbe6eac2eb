"""Does the review page stay as fast on a 100,000-item release as on a 100-item one?

For each release size a synthetic release is written to a temporary folder (pairwise and Best-of-N
items over ten scenarios of both goals, answers of a few hundred characters), ``rmb review serve``
starts on it in its own process (one annotator, a sample of ``--labels`` + 10 items), and the bench
times page to page as a person meets it: POST a label (the page's form, its token, key ``1``), follow
the redirect, get the next item's page. The server's start (reading the release, its sha256, the plan)
is reported apart: it is paid once. Prints a table, then one JSON line with the ratio of the medians.

Usage: python bench/review_page.py [--sizes 100 100000] [--labels 80]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release

SCENARIOS = (
    "Helpfulness/Chat/Discussion",
    "Helpfulness/Code/Documentation",
    "Helpfulness/Open QA/Factual",
    "Helpfulness/Reasoning/Math",
    "Helpfulness/Generation/Email",
    "Harmlessness/S1",
    "Harmlessness/S2",
    "Harmlessness/S6",
    "Harmlessness/S9",
    "Harmlessness/S10",
)
FILLER = "A reasonably detailed answer sentence that goes on for a while. " * 5


def write_synthetic(root: Path, n: int) -> None:
    rel = Release(name=f"bench-{n}", root=None)
    for i in range(n):
        scenario = SCENARIOS[i % len(SCENARIOS)]
        conv = (Turn("user", f"Question {i} about {scenario}: please explain in some detail.", "en"),)
        if i % 10 == 9:
            losers = (Answer("m2", f"Loser {i}. {FILLER}"), Answer("m3", f"Other {i}. {FILLER}"))
            rel.add(BonItem(str(i), conv, Answer("m1", f"Best {i}. {FILLER}"), losers, scenario))
        else:
            rel.add(
                PairwiseItem(str(i), conv, Answer("m1", f"Chosen {i}. {FILLER}"), Answer("m2", f"No {i}."), scenario)
            )
    write_release(rel, root)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def measure(n: int, labels: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        write_synthetic(tmp / "rel", n)
        written = time.perf_counter() - t0
        port = _free_port()
        cmd = [
            sys.executable,
            "-m",
            "rmb_build.cli",
            "review",
            "serve",
            str(tmp / "rel"),
            "--db",
            str(tmp / "r.db"),
            "--annotator",
            "bench",
            "--sample",
            str(labels + 10),
            "--port",
            str(port),
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                try:
                    urllib.request.urlopen(base + "/", timeout=5).read()
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError("rmb review serve exited") from None
                    time.sleep(0.1)
            started = time.perf_counter() - t0
            opener = urllib.request.build_opener(_NoRedirect)
            page = urllib.request.urlopen(base + "/a/bench").read().decode()
            times = []
            for _ in range(labels):
                form = {k: re.search(rf'name="{k}" value="([^"]*)"', page).group(1) for k in ("csrf", "pos")}
                body = urllib.parse.urlencode({**form, "choice": "1"}).encode()
                t = time.perf_counter()
                try:
                    opener.open(urllib.request.Request(base + "/a/bench/label", data=body, headers={"Origin": base}))
                except urllib.error.HTTPError as exc:
                    if exc.code != 303:
                        raise
                    page = urllib.request.urlopen(base + exc.headers["location"]).read().decode()
                times.append(time.perf_counter() - t)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    times.sort()
    return {
        "items": n,
        "write_s": round(written, 1),
        "start_s": round(started, 1),
        "median_ms": round(1000 * statistics.median(times), 2),
        "p90_ms": round(1000 * times[int(0.9 * len(times))], 2),
        "labels": len(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 100_000])
    parser.add_argument(
        "--labels", type=int, default=80, help="labels to time per size (at most the smallest size - 10)"
    )
    args = parser.parse_args()
    if args.labels + 10 > min(args.sizes):
        parser.error(f"--labels {args.labels}: at most {min(args.sizes) - 10} for a release of {min(args.sizes)} items")
    rows = [measure(n, args.labels) for n in args.sizes]
    print(f"{'items':>8}  {'write s':>8}  {'start s':>8}  {'page median ms':>15}  {'page p90 ms':>12}")
    for r in rows:
        print(f"{r['items']:>8}  {r['write_s']:>8}  {r['start_s']:>8}  {r['median_ms']:>15}  {r['p90_ms']:>12}")
    ratio = rows[-1]["median_ms"] / rows[0]["median_ms"]
    print(json.dumps({"bench": "review_page", "rows": rows, "median_ratio_largest_to_smallest": round(ratio, 3)}))


if __name__ == "__main__":
    main()
