"""Exact near-duplicate search (cosine >= threshold) on random unit vectors with planted duplicates.

Measures, each in its own process so that peak memory is the method's own:
- ``blocked``: ``rmb_build.embed.similarity.similar_pairs`` on all n vectors;
- ``limit``:   the bare BLAS products of the same tiles (the n^2/2 dot products alone), the floor
               any exact method pays on this machine;
- ``naive``:   the full n x n similarity matrix at once, on a subset, with its own limit.
Prints a table, then one JSON line. Usage: python bench/dedup.py [--n 100000] [--naive-n 20000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def make_vectors(n: int, dim: int, planted: int, subset: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows plus ``planted`` (source, copy) pairs with cosine between 0.92 and 0.99.

    A fifth of the pairs lie inside the first ``subset`` rows so that the naive method has some too.
    """
    rng = np.random.default_rng(seed)
    x = np.empty((n, dim), dtype=np.float32)
    for r0 in range(0, n, 8192):  # in chunks: never a float64 copy of the whole matrix
        chunk = rng.standard_normal((min(8192, n - r0), dim), dtype=np.float32)
        x[r0 : r0 + len(chunk)] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    inside = planted // 5
    idx = np.concatenate(
        [
            rng.choice(subset, 2 * inside, replace=False),
            subset + rng.choice(n - subset, 2 * (planted - inside), replace=False),
        ]
    )
    src, dst = idx[0::2], idx[1::2]
    cos = rng.uniform(0.92, 0.99, planted).astype(np.float32)
    # copy = cos * v + sin * u with u a random unit vector orthogonal to v: cosine exactly ``cos``
    v = x[src]
    u = rng.standard_normal((planted, dim), dtype=np.float32)
    u -= (u * v).sum(axis=1, keepdims=True) * v
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    x[dst] = cos[:, None] * v + np.sqrt(1 - cos**2)[:, None] * u
    pairs = np.sort(np.stack([src, dst], axis=1), axis=1)
    return x, pairs


def recall(found_i: np.ndarray, found_j: np.ndarray, planted: np.ndarray) -> float:
    if not len(planted):
        return 1.0
    found = set(zip(found_i.tolist(), found_j.tolist()))
    return sum((int(a), int(b)) in found for a, b in planted) / len(planted)


def bare_products(x: np.ndarray, block: int) -> None:
    """Only the tile products that the blocked search does, into one reused buffer."""
    buf = np.empty(block * block, dtype=np.float32)
    for r0 in range(0, len(x), block):
        for c0 in range(r0, len(x), block):
            a, b = x[r0 : r0 + block], x[c0 : c0 + block]
            np.matmul(a, b.T, out=buf[: len(a) * len(b)].reshape(len(a), len(b)))


def naive_pairs(x: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The whole similarity matrix at once, then its upper triangle above the threshold."""
    sim = x @ x.T
    i, j = np.nonzero(np.triu(sim >= threshold, 1))
    return i, j


def worker(args: argparse.Namespace) -> dict:
    x, planted = make_vectors(args.n, args.dim, args.planted, args.naive_n, args.seed)
    if args.worker.startswith("naive"):
        x = np.ascontiguousarray(x[: args.naive_n])
        planted = planted[(planted < args.naive_n).all(axis=1)]
    t0 = time.perf_counter()
    out: dict = {}
    if args.worker in ("limit", "naive_limit"):
        bare_products(x, args.block)
    elif args.worker == "blocked":
        from rmb_build.embed.similarity import similar_pairs

        i, j, _ = similar_pairs(x, threshold=args.threshold, block_size=args.block)
        out = {"recall_of_planted": recall(i, j, planted), "pairs_found": int(len(i))}
    elif args.worker == "naive":
        i, j = naive_pairs(x, args.threshold)
        out = {"recall_of_planted": recall(i, j, planted), "pairs_found": int(len(i))}
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["planted"] = int(len(planted))
    return out


def run_worker(name: str, args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--n",
        str(args.n),
        "--dim",
        str(args.dim),
        "--naive-n",
        str(args.naive_n),
        "--planted",
        str(args.planted),
        "--threshold",
        str(args.threshold),
        "--block",
        str(args.block),
        "--seed",
        str(args.seed),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--naive-n", type=int, default=20_000)
    p.add_argument("--planted", type=int, default=2_000)
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--block", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    t0 = time.perf_counter()
    limit = run_worker("limit", args)
    blocked = run_worker("blocked", args)
    naive_limit = run_worker("naive_limit", args)
    naive = run_worker("naive", args)
    rows = [("blocked (rmb_build)", args.n, blocked, limit), ("naive full matrix", args.naive_n, naive, naive_limit)]
    print(f"{'method':<22}{'n':>9}{'seconds':>10}{'BLAS floor s':>14}{'ratio':>8}{'peak MB':>10}{'recall':>8}")
    for name, n, r, lim in rows:
        print(
            f"{name:<22}{n:>9}{r['seconds']:>10.2f}{lim['seconds']:>14.2f}{r['seconds'] / lim['seconds']:>8.2f}"
            f"{r['peak_rss_mb']:>10.0f}{r['recall_of_planted']:>8.3f}"
        )
    print(f"total bench wall time: {time.perf_counter() - t0:.0f} s")
    print(
        json.dumps(
            {
                "n": args.n,
                "dim": args.dim,
                "threshold": args.threshold,
                "planted": blocked["planted"],
                "seconds": round(blocked["seconds"], 3),
                "peak_rss_mb": round(blocked["peak_rss_mb"], 1),
                "recall_of_planted": blocked["recall_of_planted"],
                "pairs_found": blocked["pairs_found"],
                "matmul_limit_seconds": round(limit["seconds"], 3),
                "vs_matmul_limit": round(blocked["seconds"] / limit["seconds"], 3),
                "naive": {
                    "n": args.naive_n,
                    "planted": naive["planted"],
                    "seconds": round(naive["seconds"], 3),
                    "peak_rss_mb": round(naive["peak_rss_mb"], 1),
                    "recall_of_planted": naive["recall_of_planted"],
                    "matmul_limit_seconds": round(naive_limit["seconds"], 3),
                    "vs_matmul_limit": round(naive["seconds"] / naive_limit["seconds"], 3),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
