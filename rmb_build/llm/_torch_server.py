"""Entry point of the torch embedded server process: ``python -m rmb_build.llm._torch_server CONFIG.json``.

Serves the part of the OpenAI API the build uses (``GET /v1/models``, ``POST /v1/chat/completions``, no
streaming) from ``torch_engine.BatchEngine``s, one per model, on the standard library's threading HTTP
server: each request waits in its own thread while the engine decodes it together with the others, and a
request whose client hangs up (it timed out, or died) is dropped from the batch, its slot free for the next
(``GET /health`` counts the rows decoding, waiting and dropped); one that only stopped sending is answered
(``ClientWatch``). A bad request gets HTTP 400 with one line in
``error.message``; the process exits when its parent is gone.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Mapping

from rmb_build.core.lifeline import die_with_named_parent
from rmb_build.llm.torch_engine import PREPARE_WAIT_S, BatchEngine, EngineError, Row, Sampling, load, prepared

log = logging.getLogger("rmb_build.llm.torch_server")


MAX_BODY = 16 << 20  # bytes of a request: a chat of a 2,048-token context is a few kB
SOCKET_TIMEOUT_S = 60  # a client that declares more than it sends is dropped after this, not held forever
GONE_POLL_S = 0.25  # how often a waiting request looks whether its client is still there


class ClientGone(Exception):
    """The request's client hung up before its reply: nothing to answer."""


_HUNG_UP = select.POLLHUP | select.POLLERR | select.POLLNVAL
# an interim reply an HTTP/1.1 client must accept and skip (RFC 9110, 15.2), sent to learn whether it is there
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def peer_state(sock: socket.socket) -> str:
    """``here`` (idle, waiting for its reply, or sending more: a pipelined request), ``ended`` (it sends no more:
    it closed the socket, or only shut its sending side and still reads; TCP tells the two apart once something
    is sent to it) or ``gone`` (the socket reports the peer hung up or reset it)."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        events = poller.poll(0)
        if not events:
            return "here"
        if events[0][1] & _HUNG_UP:
            return "gone"
        return "ended" if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"" else "here"
    except BlockingIOError:
        return "here"
    except (OSError, ValueError):  # reset by the peer; a closed socket
        return "gone"


def peer_gone(sock: socket.socket) -> bool:
    """Whether the client of ``sock`` is known to have hung up (``peer_state``)."""
    return peer_state(sock) == "gone"


PROBE_EVERY_S = 2.0  # how often a client that stopped sending is probed again (HTTP allows many interim replies)


class ClientWatch:
    """``gone()`` for a request whose reply is being computed: whether its client has hung up. A client that
    stopped sending once its request was sent (``shutdown(SHUT_WR)``, as some HTTP clients do) still waits for
    the reply; one that closed its socket does not, and the two read alike. So the first time the client reads
    as ended it is sent ``CONTINUE`` (``probe``; HTTP/1.0 allows no interim reply: None), which a closed socket
    answers with a reset, and it is gone once its socket says so. While it reads as ended the probe is sent again
    every ``every_s`` seconds: a half-closed client that closes later is then found gone too."""

    def __init__(self, sock: socket.socket, probe: bytes | None = CONTINUE, every_s: float = PROBE_EVERY_S):
        self.sock, self.probe, self.every_s = sock, probe, every_s
        self.next_probe = 0.0

    def __call__(self) -> bool:
        state = peer_state(self.sock)
        if state == "ended" and self.probe is not None and time.monotonic() >= self.next_probe:
            self.next_probe = time.monotonic() + self.every_s
            try:
                self.sock.sendall(self.probe)
            except OSError:
                return True
        return state == "gone"


class BadRequest(ValueError):
    """A request this server refuses, with the one line its 400 reply says."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _number(body: Mapping[str, object], key: str, default: float | None, *, low: float, high: float) -> float | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def _messages(body: Mapping[str, object]) -> list[dict[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise BadRequest(f"messages[{i}]: 'role' must be system, user or assistant")
        content = m.get("content")
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}]: 'content' must be a string")
        out.append({"role": str(m["role"]), "content": content})
    return out


def _schema(body: Mapping[str, object]) -> dict[str, object] | None:
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequest("'response_format' must be an object")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
    elif kind == "json_object":  # llama_cpp.server's form: an optional schema beside the type
        schema = fmt.get("schema") or {"type": "object"}
    else:
        raise BadRequest(f"response_format.type {kind!r}: expected text, json_object or json_schema")
    if not isinstance(schema, dict):
        raise BadRequest("response_format: the JSON schema must be an object")
    return schema


def _stop(body: Mapping[str, object]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return tuple(stop)
    raise BadRequest("'stop' must be a string or a list of strings")


def sampling_of(body: Mapping[str, object]) -> Sampling:
    """The request's sampling (raises BadRequest naming the field)."""
    if body.get("stream"):
        raise BadRequest("'stream' is not supported by the embedded torch server")
    if body.get("n", 1) != 1:
        raise BadRequest("'n' must be 1")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 512))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"'max_tokens' must be a positive integer, got {max_tokens!r}")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest(f"'seed' must be an integer, got {seed!r}")
    top = None
    if body.get("logprobs"):
        top = int(_number(body, "top_logprobs", 0, low=0, high=20) or 0)
    return Sampling(
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0, low=0, high=2) or 0.0,
        top_p=_number(body, "top_p", None, low=0, high=1),
        seed=seed,
        stop=_stop(body),
        schema=_schema(body),
        top_logprobs=top,
    )


class Service:
    """The models served (alias -> engine) and the replies they give."""

    def __init__(self, engines: Mapping[str, BatchEngine]):
        self.engines = dict(engines)

    def models(self) -> dict[str, object]:
        return {
            "object": "list",
            "data": [{"id": name, "object": "model", "owned_by": "rmb_build"} for name in self.engines],
        }

    def health(self) -> dict[str, object]:
        """The server's state: per model, rows in the batch, rows waiting for a slot, rows dropped (client gone)."""
        engines = {
            name: {"decoding": e.decoding, "waiting": e.waiting(), "dropped": e.dropped}
            for name, e in self.engines.items()
        }
        return {"status": "ok", "engines": engines}

    def complete(self, body: Mapping[str, object], gone: Callable[[], bool] | None = None) -> dict[str, object]:
        """The reply to a chat request; ClientGone (the row dropped from its batch) once ``gone()`` says the
        client has hung up."""
        model = body.get("model")
        if not isinstance(model, str) or model not in self.engines:
            raise BadRequest(f"model {model!r} is not served here (served: {', '.join(self.engines)})", 404)
        engine = self.engines[model]
        sampling = sampling_of(body)
        try:
            row = engine.row(engine.prompt_tokens(_messages(body)), sampling)
        except EngineError as exc:
            raise BadRequest(str(exc)) from None
        engine.submit(row)
        while not row.done.wait(GONE_POLL_S):
            if gone is not None and gone():
                engine.cancel(row)
                raise ClientGone
        if row.error is not None:
            raise BadRequest(f"generation failed: {row.error}", 500)
        message: dict[str, object] = {"role": "assistant", "content": row.text}
        choice: dict[str, object] = {"index": 0, "message": message, "finish_reason": row.finish_reason}
        if sampling.top_logprobs is not None:
            choice["logprobs"] = {"content": self._logprobs(engine, row)}
        prompt, completion = len(row.prompt), len(row.tokens)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    @staticmethod
    def _logprobs(engine: BatchEngine, row: Row) -> list[dict[str, object]]:
        def text(token: int) -> str:
            return str(engine.tokenizer.decode([token]))

        return [
            {
                "token": text(lp.token),
                "logprob": lp.logprob,
                "top_logprobs": [{"token": text(t), "logprob": v} for t, v in lp.top],
            }
            for lp in row.logprobs
        ]


def handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = SOCKET_TIMEOUT_S
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
            log.debug(format, *args)

        def _reply(self, status: int, payload: Mapping[str, object]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            kind = "invalid_request_error" if status < 500 else "server_error"
            line = " ".join(message.split())  # one line, whatever a library's message held
            self._reply(status, {"error": {"message": line, "type": kind, "code": status}})

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._reply(200, service.models())
            elif self.path.rstrip("/") == "/health":
                self._reply(200, service.health())
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}")
                return
            try:
                body = json.loads(self._body() or b"null")
            except BadRequest as exc:
                self._error(exc.status, str(exc))
                self.close_connection = True  # a body not read whole leaves the stream unusable
                return
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                self._error(400, f"the body is not JSON: {type(exc).__name__}: {exc}")
                return
            try:
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                watch = ClientWatch(self.connection, CONTINUE if self.request_version == "HTTP/1.1" else None)
                self._reply(200, service.complete(body, gone=watch))
            except ClientGone:
                log.info("a client hung up before its reply: its row dropped")
                self.close_connection = True
            except BadRequest as exc:
                self._error(exc.status, str(exc))
            except Exception as exc:  # one line, never a dropped connection the client would retry as an outage
                log.exception("request failed")
                self._error(500, f"generation failed: {type(exc).__name__}: {exc}")

        def _body(self) -> bytes:
            """The request's body, its length declared and at most MAX_BODY bytes (BadRequest otherwise)."""
            declared = self.headers.get("Content-Length")
            if declared is None:
                raise BadRequest("the request has no Content-Length", 411)
            try:
                length = int(declared)
            except ValueError:
                raise BadRequest(f"Content-Length {declared!r} is not a number") from None
            if length < 0 or length > MAX_BODY:
                raise BadRequest(f"Content-Length {length} is outside 0-{MAX_BODY} bytes", 413)
            body = self.rfile.read(length)
            if len(body) < length:
                raise BadRequest(f"the body ended after {len(body)} of its {length} bytes")
            return body

    return Handler


def serve(config: Mapping[str, object]) -> None:
    """Load every model of ``config``, start their engines, then serve until killed."""
    threads = int(str(config.get("threads") or 1))
    cache_dir = Path(str(config["cache_dir"]))
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.error("cannot create the model cache %s: %s", cache_dir, exc.strerror or exc)
        raise SystemExit(2) from None
    # another process preparing a model is waited for until then (``EmbeddedServer`` derives it from its timeout)
    prepare_until = time.monotonic() + float(str(config.get("prepare_wait_s", PREPARE_WAIT_S)))
    engines: dict[str, BatchEngine] = {}
    models = config["models"]
    assert isinstance(models, list)
    for entry in models:
        start = time.perf_counter()
        try:
            folder = prepared(Path(entry["gguf"]), cache_dir, wait_s=max(0.0, prepare_until - time.monotonic()))
            model, tokenizer = load(folder, threads)
        except EngineError as exc:  # one line in the log the parent's ServerError quotes, no traceback
            log.error("%s", exc)
            raise SystemExit(2) from None
        engine = BatchEngine(model, tokenizer, n_ctx=int(entry["n_ctx"]), max_batch=int(str(config["max_batch"])))
        engine.matcher({"type": "object"})  # the grammar's token table, built once here rather than in a request
        threading.Thread(target=engine.run, name=f"engine-{entry['alias']}", daemon=True).start()
        engines[str(entry["alias"])] = engine
        log.info(
            "loaded %s in %.1fs (batch up to %d rows)", entry["alias"], time.perf_counter() - start, engine.max_batch
        )
    server = _Server(("127.0.0.1", int(str(config["port"]))), handler(Service(engines)))
    log.info("serving %s on 127.0.0.1:%s", ", ".join(engines), config["port"])
    server.serve_forever()


class _Server(ThreadingHTTPServer):
    """One thread a connection. The listen queue holds a build's every request at once: at socketserver's 5, with
    the decode loop holding the interpreter, 3 of 64 clients asking 32 at a time were reset before accepted."""

    daemon_threads = True
    request_queue_size = 1024


def main(argv: list[str]) -> None:
    die_with_named_parent(signal_too=False)  # the parent set the signal where it could (server.py)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    serve(json.loads(Path(argv[0]).read_text(encoding="utf-8")))


if __name__ == "__main__":
    main(sys.argv[1:])
