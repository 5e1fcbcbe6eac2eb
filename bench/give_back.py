"""What the build's hand-back between stages costs, with and without freezing what survives it.

A build calls ``core.memory.give_back`` after every stage and every chain of LLM stages. With torch,
transformers and the sentence encoder loaded, a process holds ~500,000 objects that the cyclic
collector would scan at every full collection. ``give_back`` freezes (``gc.freeze``) what survives, so
the next collection scans only what was made since. This script loads the encoder as a build does,
then times N hand-backs each way, in turn, with a little garbage made between them (as a stage does),
and prints the medians and their ratio.

Usage: python bench/give_back.py [--calls 20]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from rmb_build.core.memory import give_back, thaw
from rmb_build.embed.encoder import Encoder


def _stage_garbage() -> None:
    rows = [{"id": i, "text": f"text {i}", "self": None} for i in range(20_000)]
    for row in rows[:1000]:
        row["self"] = row  # some cycles, as records and their containers make
    del rows


def plain_collect() -> None:
    """The hand-back before freezing: a full collection over everything."""
    gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    Encoder()(["load the model as a build does"])
    timings: dict[str, list[float]] = {"full collection": [], "give_back (frozen)": []}
    for _ in range(args.calls):  # in turn, each from its own steady state
        thaw()  # before freezing: every hand-back a full collection
        _stage_garbage()
        start = time.perf_counter()
        plain_collect()
        timings["full collection"].append(time.perf_counter() - start)
        give_back()  # the previous stage's hand-back froze what it kept
        _stage_garbage()
        start = time.perf_counter()
        give_back()
        timings["give_back (frozen)"].append(time.perf_counter() - start)
    thaw()
    medians = {name: statistics.median(t) for name, t in timings.items()}
    print(f"objects tracked: {len(gc.get_objects()):,}")
    for name, value in medians.items():
        print(f"{name:>20}: median {value * 1000:8.1f} ms over {args.calls} calls")
    print(f"ratio full / frozen: {medians['full collection'] / medians['give_back (frozen)']:.1f}")


if __name__ == "__main__":
    main()
