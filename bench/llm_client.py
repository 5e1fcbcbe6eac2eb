"""Benchmark: LLMClient overhead against a local OpenAI-compatible endpoint with a fixed latency.

A stub server (this script with ``--serve``, in its own process) answers every chat completion
after exactly L seconds. With concurrency C the ideal rate is C/L requests/s:
- ``throughput_vs_ideal`` = achieved requests/s / (C/L)        (goal: >= 0.9)
- ``cached_rerun_ratio``  = fully cached re-run time / uncached time (goal: < 0.02), with the
  number of requests the re-run made (must be 0).
Prints a table, then one JSON line.

    python bench/llm_client.py [--latency 0.5] [--concurrency 8] [--requests 168]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

_REPLY = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 0,
    "model": "stub",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
}


async def _serve(latency: float) -> None:
    """A minimal HTTP/1.1 keep-alive server: POST -> the reply after ``latency``; GET /count -> requests seen."""
    count = 0
    body = json.dumps(_REPLY).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = next(
                    (int(ln.split(":", 1)[1]) for ln in lines[1:] if ln.lower().startswith("content-length:")), 0
                )
                if length:
                    await reader.readexactly(length)
                if method == "POST":
                    count += 1
                    await asyncio.sleep(latency)
                    out = body
                else:
                    out = json.dumps({"count": count}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(out)).encode() + b"\r\n\r\n" + out
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def _count(port: int) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/count", timeout=10) as resp:
        return json.load(resp)["count"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per reply (L)")
    ap.add_argument("--concurrency", type=int, default=8, help="max_concurrency of the endpoint (C)")
    ap.add_argument(
        "--requests", type=int, default=168, help="requests per run (N), the first C of them warm up the connections"
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.latency))
        return

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from rmb_build.llm import ChatRequest, LLMClient
    from rmb_build.llm.config import EndpointConfig

    stub = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency", str(args.latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(stub.stdout.readline())
        endpoints = {"stub": EndpointConfig(base_url=f"http://127.0.0.1:{port}/v1", max_concurrency=args.concurrency)}
        reqs = [
            ChatRequest("stub", "stub", (("user", f"question {i}"),), max_tokens=4, stage="bench")
            for i in range(args.requests)
        ]
        with tempfile.TemporaryDirectory() as tmp:
            with LLMClient(endpoints, Path(tmp) / "llm_cache", progress=False) as client:
                client.run(reqs[: args.concurrency])  # warm the connection pool and imports
                sent_before = _count(port)
                t0 = time.perf_counter()
                first = client.run(reqs[args.concurrency :])
                uncached_s = time.perf_counter() - t0
            sent_uncached = _count(port) - sent_before
            with LLMClient(endpoints, Path(tmp) / "llm_cache", progress=False) as client:  # a resumed run
                t0 = time.perf_counter()
                again = client.run(reqs[args.concurrency :])
                cached_s = time.perf_counter() - t0
            sent_rerun = _count(port) - sent_before - sent_uncached
    finally:
        stub.terminate()
        stub.wait(10)
    n = args.requests - args.concurrency
    assert all(r.ok for r in first) and all(r.cached for r in again), "the benchmark's requests failed"
    ideal = args.concurrency / args.latency
    achieved = n / uncached_s
    result = {
        "throughput_vs_ideal": round(achieved / ideal, 4),
        "cached_rerun_ratio": round(cached_s / uncached_s, 5),
        "rerun_requests": sent_rerun,
        "uncached_requests": sent_uncached,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "requests": n,
    }
    rows = [
        (
            "uncached run",
            f"{uncached_s:.3f}s",
            f"{achieved:.1f} req/s",
            f"ideal {ideal:.1f} req/s",
            f"{sent_uncached} sent",
        ),
        ("cached re-run", f"{cached_s:.4f}s", f"{n / cached_s:.0f} req/s", "", f"{sent_rerun} sent"),
    ]
    for row in rows:
        print(f"{row[0]:<15}{row[1]:>10}{row[2]:>16}{row[3]:>20}{row[4]:>12}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
