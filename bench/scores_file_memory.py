"""Peak memory of ``rmb evaluate --scores FILE`` against the file's row count: flat, because the file is streamed
and only the rows of the release's items are kept (``rmb_build/evaluate/scores_file.py``).

Each file holds one row per item of the release (scores drawn from a seed) followed by rows naming no item of it
(a larger run's other items), in RMB's result form (a JSON list, ``--format rmb-result``) or JSONL. Each evaluate
runs in a fresh process; its peak RSS is the kernel's (``wait4``'s ``ru_maxrss``).

Run: ``python bench/scores_file_memory.py --release ../shared/rmb-sample/RMB_dataset [--rows 1e6,3e6,1e7]
[--format jsonl|rmb-result] [--work DIR]``; prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rmb_build.core.items import default_category_path
from rmb_build.release import read_release


def release_rows(release: Path, fmt: str, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for it in read_release(release).items():
        scores = [round(rng.random(), 4) for _ in it.answers()]
        path = it.category_path or default_category_path(it.set_name, it.scenario_id)
        if fmt == "jsonl":
            row = (
                {"set": "pairwise", "uid": str(it.uid), "chosen": scores[0], "rejected": scores[1]}
                if it.set_name == "pairwise"
                else {"set": "bon", "uid": str(it.uid), "best": scores[0], "losers": scores[1:]}
            )
        elif it.set_name == "pairwise":
            row = {"pair_uid": it.uid, "category_path": path, "chosen_reward": scores[0], "reject_reward": scores[1]}
            row["is_correct"] = int(scores[0] > scores[1])
        else:
            row = {
                "bon_uid": it.uid,
                "category_path": path,
                "bon_best_reward": scores[0],
                "loser_list_reward": scores[1:],
            }
        out.append(json.dumps(row))
    return out


def write_file(path: Path, own: list[str], rows: int, fmt: str) -> int:
    """``own`` then foreign rows up to ``rows`` in all; returns the file's size in bytes."""
    foreign = (
        '{{"set": "pairwise", "uid": "other-{}", "chosen": 0.5, "rejected": 0.25}}'
        if fmt == "jsonl"
        else '{{"pair_uid": "other-{}", "category_path": "Pairwise_set/Harmlessness/S1", "chosen_reward": 0.5, '
        '"reject_reward": 0.25, "is_correct": 1}}'
    )
    sep = "\n" if fmt == "jsonl" else ",\n"
    with open(path, "w", encoding="utf-8") as fh:
        if fmt != "jsonl":
            fh.write("[\n")
        fh.write(sep.join(own))
        block = 100_000
        for start in range(0, rows - len(own), block):
            n = min(block, rows - len(own) - start)
            fh.write(sep + sep.join(foreign.format(start + k) for k in range(n)))
        fh.write("\n" if fmt == "jsonl" else "\n]")
    return path.stat().st_size


def peak_rss(cmd: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, exit code) of ``cmd`` run as a child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(err.strip().splitlines()[-1] if err.strip() else f"exit {code}", file=sys.stderr)
    return usage.ru_maxrss / 1024, wall, code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", required=True)
    ap.add_argument("--rows", default="1e6,3e6,1e7", help="row counts, comma-separated")
    ap.add_argument("--format", choices=("jsonl", "rmb-result"), default="jsonl")
    ap.add_argument("--work", default=None, help="folder for the files (default: a temporary one, removed)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="rmb-scores-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    own = release_rows(Path(args.release), args.format)
    sizes = [len(own)] + [int(float(x)) for x in args.rows.split(",")]
    suffix = ".jsonl" if args.format == "jsonl" else ".json"
    table = []
    try:
        for rows in sizes:
            scores = work / f"scores-{rows}{suffix}"
            size = write_file(scores, own, rows, args.format)
            out = work / f"out-{rows}"
            cmd = [sys.executable, "-m", "rmb_build.cli", "evaluate", "--release", args.release, "--scores"]
            cmd += [str(scores), "--out", str(out), "--overwrite", "--no-progress", "--bootstrap", "50"]
            rss, wall, code = peak_rss(cmd)
            table.append(
                {
                    "rows": rows,
                    "file_mb": round(size / 2**20, 1),
                    "peak_rss_mb": round(rss),
                    "seconds": round(wall, 1),
                    "exit": code,
                }
            )
            scores.unlink()
            print(
                f"{rows:>11,} rows  {size / 2**20:8.1f} MB file  peak RSS {rss:7.0f} MB  {wall:7.1f} s  exit {code}",
                flush=True,
            )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    base = table[0]["peak_rss_mb"]
    print(
        json.dumps(
            {
                "format": args.format,
                "release_rows": len(own),
                "peak_rss_mb": {str(r["rows"]): r["peak_rss_mb"] for r in table},
                "rss_ratio_to_release_only": {str(r["rows"]): round(r["peak_rss_mb"] / base, 2) for r in table},
                "seconds": {str(r["rows"]): r["seconds"] for r in table},
            }
        )
    )


if __name__ == "__main__":
    main()
