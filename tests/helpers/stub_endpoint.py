"""A scripted OpenAI-compatible endpoint on 127.0.0.1 for tests about the toolkit, not the model.

Replies are a pure function of the request, so a build through it yields the same items every time,
however loaded the machine:

- generate (any other chat request): ``"<model> answers (quality Q): ..."`` where Q is
  ``qualities[model]`` (default ``QUALITIES``; unknown models get a quality from their name's hash);
  give each generator its own model name so their answers differ;
- judge (a request with ``response_format``): ``{"rationale": ..., "score": Q}`` with the quality
  found in the answer under evaluation (5 when there is none); a request that mentions ``"winner"``
  (a pairwise verdict, as ``rmb evaluate``'s LLM judge asks) gets ``{"rationale": ..., "winner": "A"}``;
- guard (Llama Guard's prompt): ``safe`` for answers; for a prompt, ``unsafe\\nS6`` when it contains
  ``UNSAFE_MARKER``, else ``safe``.

API::

    with StubEndpoint() as stub:                  # or stub = StubEndpoint().start(); ...; stub.stop()
        stub.base_url                              # http://127.0.0.1:PORT/v1 (GET /models, POST /chat/completions)
        stub.reply = lambda req: "hi" if ... else None   # hook: text for a request (None: the scripted reply;
                                                   # a (text, finish_reason) pair sets the finish reason)
        stub.hold("generate", after=2)             # answer 2 more generate requests, then hold the rest
        stub.release()                             # let held requests through (stop() does too)
        stub.requests                              # log: StubRequest(path, body, stage, reply) per answered chat request
        stub.bodies, stub.headers                  # every chat request's JSON body and HTTP headers, as they arrived
        stub.count("judge")                        # chat requests answered for a stage
        stub.reset()                               # forget the requests so far (log, counts, max_in_flight)
        stub.max_in_flight                         # most chat requests it held at once (with ``delay_s``)

``StubEndpoint(log=False)`` keeps no request bodies (``requests``, ``bodies`` and ``headers`` stay
empty; ``count``/``stages`` still count): for long runs such as ``bench/scale.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

QUALITIES = {"strong": 9, "weak": 3}
UNSAFE_MARKER = "private messages"
_QUALITY_RE = re.compile(r"\(quality (\d+)\)")


def request_stage(req: dict[str, Any] | bytes) -> str:
    """Which build stage sent a chat request: judge asks for JSON, the guard for Llama Guard's verdict."""
    if isinstance(req, (bytes, bytearray)):
        try:
            req = json.loads(req)
        except ValueError:
            return "other"
    if not isinstance(req, dict):
        return "other"
    if "response_format" in req:
        return "judge"
    return "guard" if "UNSAFE CONTENT CATEGORIES" in _text(req) else "generate"


def _text(req: dict[str, Any]) -> str:
    return " ".join(str(m.get("content", "")) for m in req.get("messages", []))


def quality_of(model: str, qualities: dict[str, int] = QUALITIES) -> int:
    """The judge score a generator model's answers get (1-10)."""
    return qualities.get(model, 1 + int(hashlib.sha256(model.encode()).hexdigest(), 16) % 10)


def scripted_reply(req: dict[str, Any], qualities: dict[str, int] = QUALITIES) -> str:
    """The stub's reply text to a chat request (see the module docstring)."""
    stage = request_stage(req)
    text = _text(req)
    if stage == "judge" and '"winner"' in json.dumps(req):
        return json.dumps({"rationale": "Answer A is better.", "winner": "A"})
    if stage == "judge":
        answer = text.rsplit("<answer>", 1)[-1]
        found = _QUALITY_RE.search(answer)
        score = int(found.group(1)) if found else 5
        return json.dumps({"rationale": f"The answer is of quality {score}.", "score": score})
    if stage == "guard":
        about_prompt = "LAST User message" in text  # else about an answer ("LAST Agent message"): safe
        return "unsafe\nS6" if about_prompt and UNSAFE_MARKER in text else "safe"
    model = str(req.get("model", ""))
    users = [m for m in req.get("messages", []) if m.get("role") == "user"]
    asked = str(users[-1].get("content", "")) if users else ""
    digest = hashlib.sha256(asked.encode()).hexdigest()[:8]
    return f"{model} answers (quality {quality_of(model, qualities)}): reply {digest} to {asked[:60]!r}"


@dataclass(frozen=True)
class StubRequest:
    path: str
    body: dict[str, Any]
    stage: str
    reply: str


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers (~40 ms a reply on Linux).
    disable_nagle_algorithm = True
    stub: "StubEndpoint"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": m, "object": "model", "owned_by": "stub"} for m in self.stub.qualities],
                },
            )
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "stub"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        if not path.endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {path}", "type": "stub"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "stub"}})
            return
        stub = self.stub
        stage = request_stage(body)
        stub._wait_if_held(stage)
        with stub._lock:
            if stub.log:
                stub._received.append((body, dict(self.headers)))
            stub._in_flight += 1
            stub.max_in_flight = max(stub.max_in_flight, stub._in_flight)
        try:
            if stub.delay_s:
                time.sleep(stub.delay_s)
            reply = stub.reply(body) if stub.reply else None
        finally:
            with stub._lock:
                stub._in_flight -= 1
        finish = "stop"
        if isinstance(reply, tuple):  # (text, finish_reason), e.g. "length" for an answer cut at max_tokens
            reply, finish = reply
        if reply is None:
            reply = scripted_reply(body, stub.qualities)
        prompt_tokens = max(1, len(_text(body).split()))
        completion_tokens = max(1, len(reply.split()))
        self._send(
            200,
            {
                "id": "chatcmpl-stub-" + hashlib.sha256(raw).hexdigest()[:12],
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )
        stub._answered(StubRequest(path, body, stage, reply))

    def _send(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client is gone (killed, or gave up)
            self.close_connection = True


class QueuedServer(ThreadingHTTPServer):
    """One thread a connection; many clients connecting at once (64 requests in flight) are queued, not reset
    (socketserver's listen queue is 5)."""

    daemon_threads = True
    request_queue_size = 128


class StubEndpoint:
    """The scripted endpoint; a context manager. ``qualities`` maps generator model -> judge score."""

    def __init__(
        self,
        qualities: dict[str, int] | None = None,
        reply: Callable[[dict[str, Any]], str | tuple[str, str] | None] | None = None,
        delay_s: float = 0.0,
        log: bool = True,
    ):
        self.qualities = dict(QUALITIES if qualities is None else qualities)
        self.reply = reply
        self.delay_s = delay_s  # each chat reply is held this long (to see concurrency)
        self.log = log  # keep every request's body (False: counts only)
        self._counts: Counter[str] = Counter()  # chat requests answered, per stage
        self.max_in_flight = 0
        self._in_flight = 0
        self._received: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.requests: list[StubRequest] = []
        self.port = 0
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}  # stage -> requests still answered before holding
        self._released = threading.Event()
        self._released.set()
        self._server: QueuedServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return [body for body, _ in self._received]

    @property
    def headers(self) -> list[dict[str, str]]:
        with self._lock:
            return [headers for _, headers in self._received]

    def count(self, stage: str | None = None) -> int:
        """Chat requests answered so far (for one stage, or all)."""
        with self._lock:
            return sum(self._counts.values()) if stage is None else self._counts[stage]

    def stages(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        """Forget the requests answered so far (log, counts, ``max_in_flight``)."""
        with self._lock:
            self._received.clear()
            self.requests.clear()
            self._counts.clear()
            self.max_in_flight = 0

    def hold(self, stage: str, after: int = 0) -> None:
        """Answer ``after`` more requests of ``stage``, then hold every later one until :meth:`release`."""
        with self._lock:
            self._held = {stage: after}
            self._released.clear()

    def release(self) -> None:
        """Let every held request through and hold nothing more."""
        with self._lock:
            self._held = {}
            self._released.set()

    def _wait_if_held(self, stage: str) -> None:
        with self._lock:
            if stage not in self._held:
                return
            if self._held[stage] > 0:
                self._held[stage] -= 1
                return
        self._released.wait()

    def _answered(self, entry: StubRequest) -> None:
        with self._lock:
            self._counts[entry.stage] += 1
            if self.log:
                self.requests.append(entry)

    def start(self) -> "StubEndpoint":
        handler = type("Handler", (_Handler,), {"stub": self})
        self._server = QueuedServer(("127.0.0.1", 0), handler)
        self.port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"stub-endpoint-{self.port}",
        ).start()
        return self

    def stop(self) -> None:
        self.release()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> "StubEndpoint":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
