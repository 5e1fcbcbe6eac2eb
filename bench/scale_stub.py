"""The LLM stand-in for ``bench/scale.py``: tests/helpers/stub_endpoint.py's scripted endpoint in its own process
(so it shares no GIL with the bench), and minimal async load generators that measure what rate
that stand-in sustains on this machine with a given number of requests in flight.

    with StubProcess(qualities, latency_s=0.2) as stub:   # stub.base_url; loopback only
        stub.reset()                                       # forget earlier requests
        stub.stats()                                       # {"answered", "by_stage", "busy_s", "max_in_flight"}
        bare_rate(stub.base_url, "gen-a", in_flight=64, seconds=10)    # requests/s, no rmb code

``busy_s`` is the length of the union of the answered requests' spans (each ``[done - latency, done]``):
the time during which at least one request was being answered, so CPU-only stretches of a build
(dedup, classify) do not count against its LLM rate.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _serve(qualities: dict[str, int], latency_s: float) -> None:
    """Child process: start the stub, print its URL, then answer ``stats`` / ``reset`` lines on stdin."""
    sys.path.insert(0, str(REPO / "tests" / "helpers"))
    from stub_endpoint import StubEndpoint

    from rmb_build.pipeline.run_state import busy_seconds

    done: list[float] = []
    lock = threading.Lock()

    def stamp(_req: dict) -> None:  # called once a request's delay is over; None: the scripted reply
        with lock:
            done.append(time.monotonic())
        return None

    with StubEndpoint(qualities, reply=stamp, delay_s=latency_s, log=False) as stub:
        print(stub.base_url, flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "reset":
                with lock:
                    done.clear()
                stub.reset()
                print("{}", flush=True)
            elif cmd == "stats":
                with lock:
                    times = list(done)
                print(
                    json.dumps(
                        {
                            "answered": len(times),
                            "by_stage": dict(stub.stages()),
                            "busy_s": round(busy_seconds((t - latency_s, t) for t in times), 3),
                            "max_in_flight": stub.max_in_flight,
                        }
                    ),
                    flush=True,
                )


class StubProcess:
    """tests/helpers/stub_endpoint.py's StubEndpoint (``log=False``) in a child process; a context manager."""

    def __init__(self, qualities: dict[str, int], latency_s: float):
        self.qualities, self.latency_s = qualities, latency_s
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> "StubProcess":
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", json.dumps(self.qualities), str(self.latency_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the stub endpoint did not start (said {self.base_url!r})")
        return self

    def _ask(self, cmd: str) -> dict:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def reset(self) -> None:
        self._ask("reset")

    def stats(self) -> dict:
        return self._ask("stats")

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _body(model: str, k: int) -> dict:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": f"Load test question {k}?"}]}


async def _raw_worker(host: str, port: int, model: str, end: float, done: list[float]) -> None:
    """One keep-alive HTTP/1.1 connection posting chat requests back to back until ``end``."""
    reader, writer = await asyncio.open_connection(host, port)
    k = 0
    while time.monotonic() < end:
        body = json.dumps(_body(model, k := k + 1)).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(ln.split(b":", 1)[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")
        )
        json.loads(await reader.readexactly(length))
        done.append(time.monotonic())
    writer.close()


async def _httpx_worker(client, model: str, end: float, done: list[float]) -> None:
    k = 0
    while time.monotonic() < end:
        resp = await client.post("/chat/completions", json=_body(model, k := k + 1))
        resp.raise_for_status()
        resp.json()
        done.append(time.monotonic())


async def _load(base_url: str, model: str, in_flight: int, warmup_s: float, seconds: float, http: str) -> float:
    done: list[float] = []
    t0 = time.monotonic()
    end = t0 + warmup_s + seconds
    if http == "raw":
        host, port = base_url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        await asyncio.gather(*(_raw_worker(host, int(port), model, end, done) for _ in range(in_flight)))
    else:
        import httpx

        limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
        async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60, trust_env=False) as client:
            await asyncio.gather(*(_httpx_worker(client, model, end, done) for _ in range(in_flight)))
    start = t0 + warmup_s
    return sum(1 for t in done if start <= t < end) / seconds


def bare_rate(
    base_url: str, model: str, in_flight: int, seconds: float = 10.0, warmup_s: float = 1.0, http: str = "raw"
) -> float:
    """Requests/s a bare client keeps up against ``base_url`` with ``in_flight`` requests at a time
    (completions counted over ``seconds`` after ``warmup_s``): ``raw``, one asyncio stream per
    connection writing HTTP/1.1 by hand (about the least client work there is), or ``httpx``, the
    HTTP library under the openai client the build uses, with nothing of rmb_build around it."""
    return asyncio.run(_load(base_url, model, in_flight, warmup_s, seconds, http))


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(json.loads(sys.argv[2]), float(sys.argv[3]))
