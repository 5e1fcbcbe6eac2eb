"""What a cached ``rmb evaluate --rm baseline:length`` of a release of the official size costs, beside the uncached
run: the whole command's wall time (a fresh process each, as a user runs it) and the metrics' share (results,
intervals, length control: everything after scoring), measured in-process on the run's own predictions.

The release: ``--release PATH``; else the official one where ``rmb_build.benchmarks.fetch`` has downloaded it;
else (offline) a synthetic release of the official size, 18,329 items, made by repeating the official sample's
items (``../shared/rmb-sample``) with new uids, which the table says.

Usage: ``python bench/evaluate_cached.py [--release PATH] [--items 18329] [--sample RMB_DATASET_FOLDER]``. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rmb_build.benchmarks.fetch import DATASET_FOLDER, SOURCE_FILE
from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.evaluate.length_control import length_control
from rmb_build.evaluate.metrics import DEFAULT_RESAMPLES, build_results
from rmb_build.release import write_release
from rmb_build.release.load import read_release
from rmb_build.release.read import Release

OFFICIAL_ITEMS = 18_329
SAMPLE = Path(__file__).resolve().parents[1].parent / "shared" / "rmb-sample" / DATASET_FOLDER


def official() -> Path | None:
    """The official release where ``rmb`` has fetched it, else None."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmb" / "releases" / "rmb"
    return root / DATASET_FOLDER if (root / SOURCE_FILE).is_file() else None


def synthetic(sample: Path, items: int, out: Path) -> Path:
    """``items`` items: the sample's, repeated in order with uids suffixed ``-r<k>`` from the second pass on."""
    source = list(read_release(sample).items())
    rel = Release(name="sample-repeated", root=None)
    for k in range(items):
        item = source[k % len(source)]
        rel.add(item if k < len(source) else dataclasses.replace(item, uid=f"{item.uid}-r{k // len(source)}"))
    write_release(rel, out)
    return out


def evaluate_wall(release: Path, out: Path, cache: Path) -> float:
    cmd = [sys.executable, "-m", "rmb_build.cli", "evaluate", "--release", str(release), "--rm", "baseline:length"]
    t0 = time.perf_counter()
    subprocess.run([*cmd, "--out", str(out), "--cache", str(cache), "--no-progress"], check=True, capture_output=True)
    return time.perf_counter() - t0


def metrics_seconds(release: Path, out: Path) -> float:
    """Everything ``evaluate`` computes after scoring (results with intervals, length control), in-process."""
    items = list(read_release(release).items())
    predictions = [row for _, row in read_jsonl_objects(out / "predictions.jsonl")]
    t0 = time.perf_counter()
    length_control(items, predictions, DEFAULT_RESAMPLES, 0)
    build_results(predictions, rm="baseline:length", release="r", ties="strict")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path)
    ap.add_argument("--items", type=int, default=OFFICIAL_ITEMS)
    ap.add_argument("--sample", type=Path, default=SAMPLE, help="the official sample's RMB_dataset folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rmb-bench-") as tmp:
        work = Path(tmp)
        release, kind = args.release, "given"
        if release is None and (release := official()) is not None:
            kind = "official (fetched)"
        if release is None:
            release, kind = (
                synthetic(args.sample, args.items, work / "release"),
                f"synthetic: the sample x {args.items} items",
            )
        uncached = evaluate_wall(release, work / "out-1", work / "cache")
        cached = evaluate_wall(release, work / "out-2", work / "cache")
        metrics = metrics_seconds(release, work / "out-2")
        n = sum(1 for _ in read_jsonl_objects(work / "out-2" / "predictions.jsonl"))
    rows = [
        ("release", f"{kind}, {n} items"),
        ("evaluate, uncached (wall)", f"{uncached:.1f} s"),
        ("evaluate, cached (wall)", f"{cached:.1f} s"),
        ("metrics of the cached run (in-process)", f"{metrics:.1f} s"),
    ]
    for k, v in rows:
        print(f"{k:<40} {v}")
    print(json.dumps({"items": n, "uncached_s": uncached, "cached_s": cached, "metrics_s": metrics, "release": kind}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
