"""What a cached ``rmb evaluate --rm baseline:length`` of a release of the official size costs, beside the uncached
run: the whole command's wall time (a fresh process each, as a user runs it) and the metrics' share (results,
intervals, length control: everything after scoring), measured in-process on the run's own predictions.

The release: ``--release PATH``; else the official one where ``rmb_build.benchmarks.fetch`` has downloaded it;
else (offline) a synthetic release of the official size, 18,329 items, made by repeating the official sample's
items (``../shared/rmb-sample``) with new uids, which the table says.

``--compare-with REPO`` runs the same two commands and the same metrics with another checkout's ``rmb_build``
first on ``PYTHONPATH`` (e.g. a worktree of an earlier commit), in the same minutes, so that the two read side by
side on a machine whose load moves.

Usage: ``python bench/evaluate_cached.py [--release PATH] [--items 18329] [--sample RMB_DATASET_FOLDER]
[--compare-with REPO]``. Prints a table, then one JSON line.
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


def _env(repo: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if repo is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(repo), *filter(None, [env.get("PYTHONPATH")])])
    return env


def evaluate_wall(release: Path, out: Path, cache: Path, repo: Path | None = None) -> float:
    cmd = [sys.executable, "-m", "rmb_build.cli", "evaluate", "--release", str(release), "--rm", "baseline:length"]
    t0 = time.perf_counter()
    subprocess.run(
        [*cmd, "--out", str(out), "--cache", str(cache), "--no-progress"],
        check=True,
        capture_output=True,
        env=_env(repo),
    )
    return time.perf_counter() - t0


def metrics_seconds(release: Path, out: Path) -> float:
    """Everything ``evaluate`` computes after scoring (results with intervals, length control), in-process, the
    imports done first (scipy's alone takes seconds)."""
    import scipy.stats  # noqa: F401

    items = list(read_release(release).items())
    predictions = [row for _, row in read_jsonl_objects(out / "predictions.jsonl")]
    t0 = time.perf_counter()
    length_control(items, predictions, DEFAULT_RESAMPLES, 0)
    build_results(predictions, rm="baseline:length", release="r", ties="strict")
    return time.perf_counter() - t0


def metrics_elsewhere(release: Path, out: Path, repo: Path) -> float:
    """``metrics_seconds`` with ``repo``'s ``rmb_build``, in a fresh process."""
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import evaluate_cached as e; "
    code += f"print(e.metrics_seconds(e.Path({str(release)!r}), e.Path({str(out)!r})))"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=_env(repo))
    return float(done.stdout.strip().splitlines()[-1])


def measure(release: Path, work: Path, repo: Path | None = None) -> dict[str, float]:
    """Uncached then cached evaluate (one score cache), then the cached run's metrics."""
    uncached = evaluate_wall(release, work / "out-1", work / "cache", repo)
    cached = evaluate_wall(release, work / "out-2", work / "cache", repo)
    metrics = (
        metrics_seconds(release, work / "out-2") if repo is None else metrics_elsewhere(release, work / "out-2", repo)
    )
    return {"uncached_s": uncached, "cached_s": cached, "metrics_s": metrics}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", type=Path)
    ap.add_argument("--items", type=int, default=OFFICIAL_ITEMS)
    ap.add_argument("--sample", type=Path, default=SAMPLE, help="the official sample's RMB_dataset folder")
    ap.add_argument("--compare-with", type=Path, help="another checkout whose rmb_build to time beside this one")
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
        times = {"this checkout": measure(release, work / "this")}
        if args.compare_with is not None:
            times[str(args.compare_with)] = measure(release, work / "other", args.compare_with)
        n = sum(1 for _ in read_jsonl_objects(work / "this" / "out-2" / "predictions.jsonl"))
    print(f"release: {kind}, {n} items")
    print(f"{'code':<40} {'uncached (wall)':>16} {'cached (wall)':>14} {'metrics (in-process)':>21}")
    for name, t in times.items():
        print(f"{name:<40} {t['uncached_s']:>14.1f} s {t['cached_s']:>12.1f} s {t['metrics_s']:>19.1f} s")
    print(json.dumps({"items": n, "release": kind, "times": times}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
