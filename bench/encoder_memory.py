"""The sentence encoder's peak memory and speed under the build's allocator settings, by trim policy.

A build's encoding passes are among its peaks of memory, and the encoder's heap is what grows there:
``rmb_build.core.memory.encoder_allocation`` lifts glibc's thresholds while it runs and ``hand_back``
trims the heap between groups of ``rmb_build.embed.encoder.GROUP_TEXTS`` texts once it grew
``ENCODER_HEADROOM_MB``. This bench encodes the same ShareGPT search texts (length-sorted, as the
build's store does) under each policy, each run in a fresh process (its own allocator) after
``bound_allocator`` as ``rmb build`` calls it, at two sizes, in one run with the policies' order
rotated per size (the machine's speed drifts). Printed per policy and size: seconds, peak RSS
(sampled every 50 ms) and how many trims ran; then the peak's growth per 1,000 texts between the
sizes and each policy's seconds against the build's own. Last line JSON.

Policies: ``build`` (the defaults), ``every-128`` (a trim after every 128 texts, the previous
setting), ``end-only`` (no trim until the call ends).
Usage: python bench/encoder_memory.py [--sizes 1500 6000] [--queries WORKDIR/n5000/data/raw/scale-5000/queries.jsonl]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

POLICIES = {"build": None, "every-128": (128, -1.0), "end-only": (32, float("inf"))}

CHILD = r"""
import json, sys, threading, time
from rmb_build.core import memory
memory.bound_allocator()
import rmb_build.embed.encoder as emb
texts, policy = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
if policy:
    emb.GROUP_TEXTS, memory.ENCODER_HEADROOM_MB = policy
trims, libc = [0], memory._libc()
if libc is not None:
    real_trim = libc.malloc_trim
    def counted(pad):
        trims[0] += 1
        return real_trim(pad)
    libc.malloc_trim = counted
emb.embed(["warm up the encoder"] * 8)
memory.give_back()
start, peak, done = memory.resident_mb(), [0.0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], memory.resident_mb())
        time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
trims[0] = 0
t0 = time.perf_counter()
emb.embed(texts)  # in length-sorted groups, as the build's store encodes
seconds = time.perf_counter() - t0
done.set()
print(json.dumps({"seconds": seconds, "start_mb": start, "peak_mb": max(peak[0], memory.resident_mb()),
                  "trims": trims[0]}))
"""


def queries_texts(path: str, n: int) -> list[str]:
    """The first ``n`` distinct search texts (every user turn) of a build's gathered queries, as dedup embeds them."""
    from rmb_build.core.text import search_text
    from rmb_build.stages.gather import read_queries

    texts = list(dict.fromkeys(search_text(q.conversation) for q in read_queries(path)))
    if len(texts) < n:
        raise SystemExit(f"{path}: {len(texts)} distinct search texts, {n} asked")
    return texts[:n]


def run_policy(texts_file: str, policy: tuple | None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, texts_file, json.dumps(policy)], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise SystemExit(f"encoder run failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs=2, default=[1500, 6000], help="texts encoded: small, large")
    p.add_argument(
        "--queries",
        help="a build's gathered queries (data/raw/<name>/queries.jsonl; bench/scale.py's: "
        "WORKDIR/n5000/data/raw/scale-5000/queries.jsonl): their distinct search "
        "texts instead of single-turn ShareGPT prompts",
    )
    args = p.parse_args()
    import tempfile

    from encoder import sharegpt_prompts  # bench/encoder.py: distinct single-turn ShareGPT search texts

    small, large = sorted(args.sizes)
    texts = queries_texts(args.queries, large) if args.queries else sharegpt_prompts(large)
    results: dict[str, dict[int, dict]] = {name: {} for name in POLICIES}
    names = list(POLICIES)
    with tempfile.TemporaryDirectory() as tmp:
        for turn, size in enumerate((small, large)):
            path = f"{tmp}/texts-{size}.json"
            with open(path, "w") as fh:
                json.dump(texts[:size], fh)
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                t0 = time.time()
                r = run_policy(path, POLICIES[name])
                results[name][size] = r
                print(
                    f"{name:>10}  {size:>6} texts  {r['seconds']:7.1f} s  peak {r['peak_mb']:6.0f} MB "
                    f"(start {r['start_mb']:.0f})  trims {r['trims']:>4}  [{time.time() - t0:.0f} s with start-up]",
                    flush=True,
                )
    summary = {"sizes": [small, large], "policies": {}}
    build = results["build"][large]["seconds"]
    for name, by_size in results.items():
        growth = (by_size[large]["peak_mb"] - by_size[small]["peak_mb"]) / (large - small) * 1000
        summary["policies"][name] = {
            "peak_mb": {str(s): round(r["peak_mb"]) for s, r in by_size.items()},
            "seconds": {str(s): round(r["seconds"], 1) for s, r in by_size.items()},
            "trims": {str(s): r["trims"] for s, r in by_size.items()},
            "peak_growth_mb_per_1000_texts": round(growth, 1),
            "seconds_vs_build": round(by_size[large]["seconds"] / build, 3),
        }
        print(
            f"{name:>10}: peak grows {growth:.1f} MB per 1,000 texts; {by_size[large]['seconds'] / build:.3f} x "
            f"the build's seconds at {large}"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
