"""Benchmark: the embedded endpoint with one llama.cpp server against several (``servers: N``).

The same requests (distinct ShareGPT-like questions, temperature 0, a fixed max_tokens) through a fresh
cache each time, so every one is answered by a server; the servers are started before the clock runs.
Rounds alternate the counts (1, 2, 1, 2, ...) so that the machine's noise falls on both alike. Prints a
table and the ratio of each count's median rate to one server's, then one JSON line.

    python bench/embedded_servers.py [--servers 1 2] [--requests 24] [--max-tokens 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

QUESTIONS = [
    "How do I reverse a list in Python?",
    "What is the difference between TCP and UDP?",
    "Give me three tips for a job interview.",
    "Explain what a hash table is.",
    "Write a haiku about autumn.",
    "Why is the sky blue?",
    "How can I improve my sleep?",
    "What does HTTP status 404 mean?",
]


def one_round(servers: int, requests: int, max_tokens: int) -> float:
    """Requests answered a minute by ``servers`` embedded servers, on an empty cache."""
    from rmb_build.llm import ChatRequest, LLMClient
    from rmb_build.llm.config import EndpointConfig

    reqs = [
        ChatRequest(
            "local",
            "smollm2",
            (("user", f"{QUESTIONS[i % len(QUESTIONS)]} (question {i})"),),
            temperature=0.0,
            max_tokens=max_tokens,
        )
        for i in range(requests)
    ]
    with tempfile.TemporaryDirectory(prefix="rmb-bench-servers-") as tmp:
        endpoint = EndpointConfig(embedded="smollm2", n_ctx=1024, servers=servers)
        with LLMClient({"local": endpoint}, Path(tmp) / "llm_cache", progress=False) as client:
            client.base_url("local")  # start the servers before the clock
            t0 = time.perf_counter()
            results = client.run(reqs)
            seconds = time.perf_counter() - t0
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed: {failed[:3]}")
    return requests / seconds * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    rates: dict[int, list[float]] = {n: [] for n in args.servers}
    for r in range(args.rounds):
        for n in args.servers:
            rate = one_round(n, args.requests, args.max_tokens)
            rates[n].append(rate)
            print(f"round {r + 1}: servers {n}: {rate:.1f} requests/min", flush=True)
    base = statistics.median(rates[args.servers[0]])
    print(f"\n| servers | requests/min, median of {args.rounds} | ratio to {args.servers[0]} |\n| ---: | ---: | ---: |")
    for n in args.servers:
        med = statistics.median(rates[n])
        print(f"| {n} | {med:.1f} | {med / base:.2f} |")
    print(json.dumps({"requests": args.requests, "max_tokens": args.max_tokens, "rates_per_min": rates}))


if __name__ == "__main__":
    main()
