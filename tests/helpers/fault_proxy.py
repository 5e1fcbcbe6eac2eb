"""A fault-injecting HTTP proxy on 127.0.0.1 in front of a real server, for reliability tests.

    with FaultProxy("http://127.0.0.1:8080/v1") as proxy:      # proxy.url mirrors the upstream path
        proxy.schedule("429_retry_after", "500")                 # the next two requests fail, then pass
        proxy.set_fault("reset", fraction=0.3)                   # or: 30% of requests, seeded
        proxy.take_away(5)                                       # refuse connections for 5 seconds
        proxy.forwarded["/v1/chat/completions"]                  # requests that reached the upstream
        proxy.chat_bodies                                         # their bodies, in order

Faults: ``429`` (no Retry-After), ``429_retry_after`` (Retry-After: ``retry_after_s``), ``500``,
``503``, ``reset`` (TCP RST, no reply), ``stall`` (no reply for ``stall_s``, then the connection
is closed), ``truncate`` (the upstream's reply cut in half under its full Content-Length),
``malformed`` (HTTP 200 with a broken JSON body), ``bad_schema`` (the upstream's reply with the
message content replaced by ``bad_reply``, valid JSON that ignores the judge's schema), ``hang`` (the
request read, then nothing until the proxy stops), ``trickle`` (the upstream's reply, headers at once,
then its body one byte every ``trickle_s``), ``huge`` (HTTP 200, a ``huge_bytes`` body that is the
upstream's reply padded with spaces: valid JSON; ``huge_chunked``: the same without a Content-Length).
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import struct
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from stub_endpoint import QueuedServer

FAULTS = (
    "429",
    "429_retry_after",
    "500",
    "503",
    "reset",
    "stall",
    "truncate",
    "malformed",
    "bad_schema",
    "hang",
    "trickle",
    "huge",
    "huge_chunked",
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: "FaultProxy"

    def log_message(self, *args) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.proxy._connections.add(self.connection)

    def finish(self) -> None:
        self.proxy._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        proxy = self.proxy
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        if proxy.away:
            self._reset()
            return
        fault = proxy._next_fault(path, body)
        with proxy._lock:
            proxy.received[path] += 1
            proxy.requests.append((time.monotonic(), path, fault))
            proxy._in_flight += 1
            proxy.max_in_flight = max(proxy.max_in_flight, proxy._in_flight)
            if fault:
                proxy.injected[fault] += 1
        try:
            self._respond(fault, path, body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. its timeout)
            self.close_connection = True
        finally:
            with proxy._lock:
                proxy._in_flight -= 1

    def _respond(self, fault: str | None, path: str, body: bytes) -> None:
        proxy = self.proxy
        if fault in ("429", "429_retry_after", "500", "503"):
            status = int(fault[:3])
            headers = {"Retry-After": f"{proxy.retry_after_s:g}"} if fault == "429_retry_after" else {}
            self._send(
                status, json.dumps({"error": {"message": f"injected {fault}", "type": "fault_proxy"}}).encode(), headers
            )
        elif fault == "reset":
            self._reset()
        elif fault == "stall":
            proxy._stopping.wait(proxy.stall_s)
            self.close_connection = True
            self._reset()
        elif fault == "hang":
            proxy._stopping.wait()
            self._reset()
        elif fault == "malformed":
            self._send(200, b'{"id": "chatcmpl-fault", "object": "chat.completion", "choices": [{"index": 0, "mess')
        else:
            status, headers, data = proxy._forward(self.command, self.path, self.headers, body)
            with proxy._lock:
                proxy.forwarded[path] += 1
                if path.endswith("/chat/completions"):
                    proxy.chat_bodies.append(body)
            if fault == "bad_schema" and status == 200:
                reply = json.loads(data)
                reply["choices"][0]["message"]["content"] = proxy.bad_reply
                data = json.dumps(reply).encode()
            if fault == "trickle":
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for i in range(len(data)):
                    if proxy._stopping.wait(proxy.trickle_s):
                        break
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                self.close_connection = True
                return
            if fault in ("huge", "huge_chunked"):
                padded = data + b" " * max(0, proxy.huge_bytes - len(data))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if fault == "huge":
                    self.send_header("Content-Length", str(len(padded)))
                    self.end_headers()
                    self.wfile.write(padded)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(padded), 65536):
                    chunk = padded[i : i + 65536]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
                return
            if fault == "truncate":
                self.send_response(status)
                self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)  # a clean close, short of the promised length
                return
            self._send(status, data, {"Content-Type": headers.get("Content-Type", "application/json")})

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reset(self) -> None:
        """Close with an RST instead of a FIN: the client sees a reset connection."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()  # they hold the fd: the socket only really closes with them
            self.wfile.close()
            self.connection.close()
        except OSError:
            pass


class FaultProxy:
    """A proxy to ``upstream`` (a base URL) that injects faults; a context manager.

    ``fraction`` of requests (seeded) get ``fault``; ``schedule`` queues faults for the next
    requests first. Only requests whose path ends with one of ``paths`` are faulted (default: chat
    completions), so health checks pass through. Counters: ``received``, ``forwarded`` (reached the
    upstream), ``injected`` (per fault); ``max_in_flight``; ``requests`` (time, path, fault).
    """

    def __init__(
        self,
        upstream: str,
        *,
        fault: str | None = None,
        fraction: float = 1.0,
        seed: int = 0,
        retry_after_s: float = 1.0,
        stall_s: float = 30.0,
        trickle_s: float = 1.0,
        huge_bytes: int = 4 << 20,
        bad_reply: str = '{"rmb_fault": "this reply ignores the schema"}',
        paths: tuple[str, ...] = ("/chat/completions",),
    ):
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.upstream_path = parts.path.rstrip("/")
        self.retry_after_s, self.stall_s, self.bad_reply, self.paths = retry_after_s, stall_s, bad_reply, paths
        self.trickle_s, self.huge_bytes = trickle_s, huge_bytes
        self.set_fault(fault, fraction)
        self._rng = random.Random(seed)
        self._queue: deque[str | None] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self.port: int = 0
        self.away = False
        self.received: Counter[str] = Counter()
        self.forwarded: Counter[str] = Counter()
        self.chat_bodies: list[bytes] = []  # chat requests that reached the upstream, in order
        self.injected: Counter[str] = Counter()
        self.requests: list[tuple[float, str, str | None]] = []
        self.max_in_flight = 0
        self._in_flight = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.upstream_path}"

    # ---- what to inject --------------------------------------------------------------------------

    def set_fault(self, fault: str | None, fraction: float = 1.0) -> None:
        """Inject ``fault`` into ``fraction`` of the faultable requests (None: pass everything)."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
        if not 0 <= fraction <= 1:
            raise ValueError("fraction must be within [0, 1]")
        self.fault, self.fraction = fault, fraction

    def schedule(self, *faults: str | None) -> None:
        """Faults for the next faultable requests, in order (None lets one through)."""
        for f in faults:
            if f is not None and f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}")
        with self._lock:
            self._queue.extend(faults)

    def _next_fault(self, path: str, body: bytes = b"") -> str | None:
        if not any(path.endswith(p) for p in self.paths):
            return None
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            return self._random_fault(body)

    def _random_fault(self, body: bytes) -> str | None:
        """The fault for a request not covered by the schedule (called under the lock)."""
        return self.fault if self._rng.random() < self.fraction else None

    def reset_counts(self) -> None:
        with self._lock:
            self.received.clear()
            self.forwarded.clear()
            self.chat_bodies.clear()
            self.injected.clear()
            self.requests.clear()
            self.max_in_flight = 0

    def chat_forwarded(self) -> int:
        """Chat-completion requests that reached the upstream."""
        return sum(n for p, n in self.forwarded.items() if p.endswith("/chat/completions"))

    # ---- forwarding --------------------------------------------------------------------------------

    def _forward(self, method: str, path: str, headers, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=600)
        try:
            fwd = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection", "content-length")}
            conn.request(method, path, body=body or None, headers=fwd)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    # ---- lifetime ------------------------------------------------------------------------------------

    handler_class: type = _Handler  # subclasses that count or inspect requests swap in their own handler
    thread_name = "fault-proxy"

    def _listen(self, port: int) -> None:
        handler = type("Handler", (self.handler_class,), {"proxy": self})
        self._server = QueuedServer(("127.0.0.1", port), handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"{self.thread_name}-{self.port}",
        )
        self._thread.start()

    def _close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        for conn in list(self._connections):  # keep-alive connections would otherwise still be served
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def start(self) -> "FaultProxy":
        self._stopping.clear()
        self._listen(0)
        return self

    def take_away(self, seconds: float) -> None:
        """Refuse every connection for ``seconds`` (the port is closed), then listen again on it."""
        self.away = True
        port = self.port
        self._close_listener()

        def back() -> None:
            if not self._stopping.is_set():
                self._listen(port)
                self.away = False

        self._timer = threading.Timer(seconds, back)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        self._close_listener()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
