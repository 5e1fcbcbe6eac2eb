"""The torch embedded server (``rmb_build/llm/_torch_server.py``): the OpenAI chat API the build uses, on the
real SmolLM2-135M-Instruct (its GGUF file dequantised), requests decoded together in one batch."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

from rmb_build.llm import ChatRequest, EmbeddedServer, LLMClient
from rmb_build.llm._torch_server import BadRequest, sampling_of
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.structured import score_reply_schema
from rmb_build.stages.guard import verdict_schema

pytest.importorskip("llguidance", reason="the build extra is not installed")

PROMPTS = [
    "Why is the sky blue?",
    "Name three fruits.",
    "What is 2+2?",
    "Write a haiku about rain.",
    "How do I boil an egg?",
    "Say hello in French.",
]


@pytest.fixture(scope="module")
def torch_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("torch-server") / "server.log"
    with EmbeddedServer(("smollm2",), n_ctx=1024, log_path=log, backend="torch") as server:
        yield server


def post(server: EmbeddedServer, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=600) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def chat(prompt: str, **fields) -> dict:
    return {"model": "smollm2", "messages": [{"role": "user", "content": prompt}], "temperature": 0, **fields}


@pytest.mark.slow
def test_a_plain_chat_is_answered_with_usage_and_the_model_listed(torch_server):
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(torch_server.base_url + "/models") as r:
        assert [m["id"] for m in json.loads(r.read())["data"]] == ["smollm2"]
    status, reply = post(torch_server, chat("What is the capital of France?", max_tokens=32))
    assert status == 200
    choice = reply["choices"][0]
    assert "Paris" in choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    usage = reply["usage"]
    assert usage["prompt_tokens"] > 10 and 0 < usage["completion_tokens"] <= 32
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.slow
def test_a_reply_cut_by_max_tokens_says_length(torch_server):
    status, reply = post(torch_server, chat("Write a long story about a dragon.", max_tokens=3))
    assert status == 200
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 3


@pytest.mark.slow
def test_json_schema_replies_always_follow_the_schema(torch_server):
    """The guard's verdict and the judge's score, in both forms the build sends (json_object with a schema, the
    embedded default; json_schema), asked together: every reply parses and validates (max_tokens covers the
    longest reply the schemas allow: a 200-character rationale of one-character tokens)."""
    asks = []
    for schema in (verdict_schema(), score_reply_schema()):
        for fmt in (
            {"type": "json_object", "schema": schema},
            {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": False}},
        ):
            asks += [(schema, chat(p + " Reply in JSON.", max_tokens=260, response_format=fmt)) for p in PROMPTS[1:3]]
    with ThreadPoolExecutor(len(asks)) as pool:
        replies = list(pool.map(lambda a: post(torch_server, a[1]), asks))
    for (schema, _), (status, reply) in zip(asks, replies):
        assert status == 200
        assert reply["choices"][0]["finish_reason"] == "stop", reply
        jsonschema.validate(json.loads(reply["choices"][0]["message"]["content"]), schema)


@pytest.mark.slow
def test_concurrent_replies_equal_sequential_ones_at_temperature_zero(torch_server):
    bodies = [chat(p, max_tokens=24) for p in PROMPTS]
    alone = [post(torch_server, b)[1]["choices"][0]["message"]["content"] for b in bodies]
    with ThreadPoolExecutor(len(bodies)) as pool:
        together = [r[1]["choices"][0]["message"]["content"] for r in pool.map(lambda b: post(torch_server, b), bodies)]
    assert together == alone
    assert len(set(alone)) == len(alone)


@pytest.mark.slow
def test_a_build_width_of_clients_connecting_at_once_is_queued_never_reset(torch_server):
    """64 clients, 32 at a time (the default batch width): with socketserver's listen queue of 5, 3 of them were
    reset before the server accepted them, while the decode loop held the interpreter."""
    bodies = [
        chat(f"{p} (Answer number {i}.)", max_tokens=8, temperature=0.7, seed=i) for i in range(11) for p in PROMPTS
    ]

    def ask(body: dict) -> object:
        try:
            return post(torch_server, body)[0]
        except OSError as exc:  # a reset connection
            return repr(exc)

    with ThreadPoolExecutor(32) as pool:
        statuses = list(pool.map(ask, bodies[:64]))
    assert statuses == [200] * len(statuses), [s for s in statuses if s != 200][:3]


@pytest.mark.slow
def test_seeded_sampling_repeats_and_stop_strings_cut(torch_server):
    body = chat("Tell me a fun fact about cats.", max_tokens=16, temperature=0.9, seed=7)
    first, again = post(torch_server, body)[1], post(torch_server, body)[1]
    assert first["choices"][0]["message"]["content"] == again["choices"][0]["message"]["content"]
    status, cut = post(torch_server, chat("Count from 1 to 10, separated by commas.", max_tokens=40, stop=["5"]))
    assert status == 200 and "5" not in cut["choices"][0]["message"]["content"]
    assert cut["choices"][0]["finish_reason"] == "stop"


@pytest.mark.slow
def test_bad_requests_get_one_clear_line(torch_server):
    cases = [
        ({"model": "smollm2", "messages": "hi"}, 400, "'messages' must be"),
        (chat("hi", max_tokens=0), 400, "'max_tokens' must be a positive integer"),
        (chat("hi", response_format={"type": "xml"}), 400, "response_format.type 'xml'"),
        ({**chat("hi"), "model": "gpt-9"}, 404, "model 'gpt-9' is not served here (served: smollm2)"),
        (chat("hi " * 2000), 400, "the context holds 1024"),
    ]
    for body, code, message in cases:
        status, reply = post(torch_server, body)
        assert status == code and message in reply["error"]["message"], reply


@pytest.mark.slow
def test_the_client_uses_the_torch_backend_with_its_own_cache_identity(tmp_path):
    endpoints = {"local": EndpointConfig(embedded="smollm2", backend="torch", n_ctx=512, max_batch=4)}
    assert endpoints["local"].max_concurrency == 4
    reqs = [
        ChatRequest("local", "smollm2", (("user", p),), max_tokens=48, response_schema=verdict_schema())
        for p in PROMPTS[:4]
    ]
    with LLMClient(endpoints, tmp_path / "llm_cache", log_dir=tmp_path / "logs", progress=False) as client:
        results = client.run(reqs)
    assert all(r.error is None and r.parsed["verdict"] in ("safe", "unsafe") for r in results), results
    assert (tmp_path / "logs" / "torch_server.log").is_file()
    with LLMClient(endpoints, tmp_path / "llm_cache", progress=False) as again:
        assert [r.text for r in again.run(reqs)] == [r.text for r in results] and again._servers == []


def test_request_fields_are_checked_before_any_work():
    assert sampling_of({"max_tokens": 5, "temperature": 0, "stop": "x", "seed": 3}).stop == ("x",)
    for body, message in [
        ({"stream": True}, "'stream' is not supported"),
        ({"max_tokens": "5"}, "'max_tokens' must be a positive integer"),
        ({"temperature": 3}, "'temperature' must be a number from 0 to 2"),
        ({"stop": [1]}, "'stop' must be a string or a list of strings"),
        ({"seed": 1.5}, "'seed' must be an integer"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": "x"}}}, "must be an object"),
    ]:
        with pytest.raises(BadRequest, match=message):
            sampling_of(body)


def test_backend_selection_and_slots(monkeypatch):
    import rmb_build.llm.config as config

    assert EndpointConfig(embedded="smollm2", backend="torch").max_concurrency == config.TORCH_MAX_BATCH
    assert EndpointConfig(embedded="smollm2", backend="torch", servers=2, max_batch=3).max_concurrency == 6
    assert EndpointConfig(embedded="smollm2", backend="llama_cpp", servers=2).max_concurrency == 2
    monkeypatch.setattr(config, "backend_installed", lambda b: b == "llama_cpp")
    assert EndpointConfig(embedded="smollm2").embedded_backend == "llama_cpp"
    monkeypatch.setattr(config, "backend_installed", lambda b: b == "torch")  # the build extra without llama.cpp
    assert EndpointConfig(embedded="smollm2").embedded_backend == "torch"
    assert EndpointConfig(embedded="smollm2").max_concurrency == config.TORCH_MAX_BATCH
    monkeypatch.setattr(config, "backend_installed", lambda b: True)
    assert EndpointConfig(embedded="smollm2").embedded_backend == config.AUTO_ORDER[0]
    assert EndpointConfig(embedded="gemma3").embedded_backend == "llama_cpp"  # no chat template for torch
    with pytest.raises(ValueError, match="'backend' and 'max_batch' are for an embedded endpoint"):
        EndpointConfig(base_url="http://127.0.0.1:9/v1", backend="torch")


def test_with_no_backend_installed_auto_names_the_one_that_compiles_nothing(monkeypatch):
    """A reviewer's finding: with neither backend installed, auto fell back to llama_cpp, so the line a core-only
    user saw sent them to the extra that compiles llama.cpp for 6-17 minutes."""
    import rmb_build.llm.config as config

    monkeypatch.setattr(config, "backend_installed", lambda b: False)
    assert EndpointConfig(embedded="smollm2").embedded_backend == "torch"
    assert config.BACKEND_EXTRAS["torch"] == "build"
    assert EndpointConfig(embedded="gemma3").embedded_backend == "llama_cpp"  # torch cannot run it


def _raw(server: EmbeddedServer, head: bytes, body: bytes = b"") -> tuple[int, str]:
    import socket

    host, port = server.base_url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    status = int(reply.split(b" ", 2)[1])
    message = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["message"]
    return status, message


@pytest.mark.slow
def test_a_hostile_request_gets_one_line_and_never_a_dropped_connection(torch_server):
    """A reviewer's probes: a non-numeric, negative or huge Content-Length, none at all, JSON nested 100,000
    deep, a seed above 2**63 — each dropped the connection (the client read an outage and retried) or held a
    thread; each is now one line with its status, and the server goes on answering."""
    line = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
    for head, body, status in [
        (line + b"\r\nContent-Length: abc", b"{}", 400),
        (line + b"\r\nContent-Length: -1", b"", 413),
        (line + b"\r\nContent-Length: 999999999999", b"", 413),
        (line, b"", 411),
        (line + b"\r\nContent-Length: 100000", b"[" * 100000, 400),
    ]:
        got, message = _raw(torch_server, head, body)
        assert got == status and "\n" not in message, (head, got, message)
    status, reply = post(torch_server, chat("Say hi.", max_tokens=4, temperature=0.5, seed=2**70))
    assert status == 200, reply
    status, reply = post(torch_server, chat("Say hi.", max_tokens=4))
    assert status == 200 and reply["choices"][0]["message"]["content"]


@pytest.mark.slow
def test_a_rows_bad_sampling_fails_no_other_row_of_its_batch(torch_server):
    """A reviewer's finding: ``temperature: 1e-37`` overflowed ``logits / temperature`` and the whole decode
    step failed, every row decoded beside it answering HTTP 500. Such a temperature now samples as argmax."""
    normal = chat("Count from one to twenty.", max_tokens=60)
    tiny = chat("Count from one to twenty.", max_tokens=60, temperature=1e-37, seed=1)
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda body: post(torch_server, body), [normal, tiny, normal, tiny]))
    assert [status for status, _ in replies] == [200] * 4, replies
    texts = {reply["choices"][0]["message"]["content"] for _, reply in replies}
    assert len(texts) == 1  # argmax all four


def _health(server: EmbeddedServer) -> dict:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(server.base_url[:-3] + "/health") as r:
        return json.loads(r.read())["engines"]["smollm2"]


def _until(check, what: str, limit_s: float = 300.0) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_a_client_that_hangs_up_leaves_the_batch_and_frees_its_slot(tmp_path):
    """Issue 49: a client that timed out or died left its row decoding in the batch to its last token, holding
    the slot. A one-slot server is given a request that cannot end soon (a grammar asks for 6,000 characters);
    its client hangs up mid-decode: the row is dropped (the server's own count says so) and the next request
    gets the slot."""
    import socket

    endless = chat(
        "Write a very long story.",
        max_tokens=1800,
        response_format={"type": "json_schema", "json_schema": {"schema": {"type": "string", "minLength": 6000}}},
    )
    body = json.dumps(endless).encode()
    with EmbeddedServer(("smollm2",), n_ctx=2048, log_path=tmp_path / "s.log", backend="torch", max_batch=1) as srv:
        host, port = srv.base_url.split("//")[1].split("/")[0].split(":")
        sock = socket.create_connection((host, int(port)), timeout=60)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        _until(lambda: _health(srv)["decoding"] == 1, "the long request never began decoding")
        sock.close()
        _until(lambda: _health(srv)["dropped"] == 1, "the abandoned row was never dropped")
        assert _health(srv)["decoding"] == 0
        status, reply = post(srv, chat("Say hi.", max_tokens=4))
        assert status == 200 and reply["choices"][0]["message"]["content"], reply
        _until(lambda: _health(srv)["decoding"] == 0, "the short request's row never left the batch")
        assert _health(srv) == {"decoding": 0, "waiting": 0, "dropped": 1}  # it ended; it was not dropped


def test_a_hung_up_client_is_told_from_an_idle_or_pipelining_one():
    import socket

    from rmb_build.llm._torch_server import peer_gone

    server_side, client = socket.socketpair()
    with server_side:
        assert not peer_gone(server_side)  # idle, waiting for its reply
        client.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        assert not peer_gone(server_side)  # a pipelined request: still there
        server_side.recv(1024)
        client.close()
        assert peer_gone(server_side)


@pytest.mark.slow
def test_the_dry_runs_torch_count_is_the_torch_servers_prompt_tokens(torch_server):
    """The dry run's exact count on the torch backend (``tokens.exact_counter``) is the ``usage.prompt_tokens``
    the torch server reports for the same messages."""
    from rmb_build.llm.tokens import exact_counter

    count = exact_counter(EndpointConfig(embedded="smollm2", backend="torch"))
    assert count is not None
    reqs = [
        ChatRequest("local", "smollm2", (("user", p),), max_tokens=1) for p in ("Say hi.", "Más 🙂 — <b>x</b>\n\n y")
    ] + [ChatRequest("local", "smollm2", (("system", "Be brief."), ("user", "Rate it 1-10.")), max_tokens=1)]
    for req in reqs:
        status, reply = post(torch_server, {**chat("", max_tokens=1), "messages": req.message_dicts()})
        assert status == 200 and reply["usage"]["prompt_tokens"] == count(req), (req, reply)


def _tcp_pair() -> tuple:
    """A connected TCP pair on 127.0.0.1 (server side, client side): TCP, not a socketpair, since a closed
    TCP peer reads as one that only stopped sending until something is sent to it."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server_side, _ = listener.accept()
    return server_side, client


def test_a_client_that_only_stopped_sending_is_still_there_and_a_closed_one_is_gone():
    """A reviewer's finding: a client that shut its sending side once its request was sent (``SHUT_WR``, which
    some HTTP clients do) read as gone and its request was dropped. It is sent one interim ``100 Continue``,
    which a closed client answers with a reset and a half-closed one reads and skips."""
    import socket
    import time

    from rmb_build.llm._torch_server import CONTINUE, ClientWatch

    server_side, client = _tcp_pair()
    with server_side, client:
        watch = ClientWatch(server_side)
        assert not watch()  # idle, waiting for its reply: nothing sent to it
        client.shutdown(socket.SHUT_WR)
        assert not any(watch() for _ in range(5))
        client.settimeout(10)
        assert client.recv(100) == CONTINUE  # once
        server_side.sendall(b"the reply")
        assert client.recv(100) == b"the reply"
    server_side, client = _tcp_pair()
    with server_side:
        watch = ClientWatch(server_side)
        client.close()
        _until(watch, "a closed client never read as gone", 30)
    server_side, client = _tcp_pair()
    with server_side:  # an HTTP/1.0 client: no interim reply allowed, so kept until its reply is written
        watch = ClientWatch(server_side, probe=None)
        client.close()
        time.sleep(0.1)
        assert not watch()


def test_a_half_closed_client_that_closes_later_is_found_gone():
    """A reviewer's finding: the probe went once, so a client that shut its sending side, read the probe and then
    closed was never sent anything again, never reset, and its row decoded to the end."""
    import socket

    from rmb_build.llm._torch_server import CONTINUE, ClientWatch

    server_side, client = _tcp_pair()
    with server_side:
        watch = ClientWatch(server_side, every_s=0.05)
        client.shutdown(socket.SHUT_WR)
        assert not watch()
        client.settimeout(10)
        assert client.recv(100) == CONTINUE
        client.close()
        _until(watch, "a client that half-closed and then closed never read as gone", 30)


class _FakeService:
    """A torch server's service without a model: a reply takes until the test says the client has done what it
    does, then a few looks at whether it is still there."""

    def __init__(self):
        import threading

        self.client_done, self.dropped = threading.Event(), threading.Event()

    def complete(self, body: dict, gone) -> dict:
        import time

        from rmb_build.llm._torch_server import ClientGone

        self.client_done.wait(30)
        for _ in range(300):
            if gone():
                self.dropped.set()
                raise ClientGone
            if body.get("closes") is not True and _ >= 10:  # ten looks, half a second: the reply is ready
                return {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
            time.sleep(0.05)
        raise AssertionError("the closed client was never seen gone")


def test_the_server_answers_a_half_closed_client_and_drops_a_closed_one():
    """The real handler and server class on a service without a model: an HTTP/1.1 client that sends its request
    and shuts its sending side gets its reply (the interim 100 skipped by http.client, as RFC 9110 asks of every
    client); one that closes its socket has its request dropped."""
    import http.client
    import socket
    import threading

    from rmb_build.llm._torch_server import _Server, handler

    for closes in (False, True):
        service = _FakeService()
        server = _Server(("127.0.0.1", 0), handler(service))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            body = json.dumps({"model": "x", "closes": closes}).encode()
            sock = socket.create_connection(server.server_address, timeout=30)
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            if closes:
                sock.close()
                service.client_done.set()
                assert service.dropped.wait(30)
                continue
            sock.shutdown(socket.SHUT_WR)
            service.client_done.set()
            reply = http.client.HTTPResponse(sock)
            reply.begin()
            assert reply.status == 200 and json.loads(reply.read())["choices"][0]["message"]["content"] == "hi"
            assert not service.dropped.is_set()
            sock.close()
        finally:
            server.shutdown()
            server.server_close()


@pytest.mark.slow
def test_the_real_server_answers_a_client_that_shut_its_sending_side(torch_server):
    import http.client
    import socket

    body = json.dumps(chat("Say hi.", max_tokens=4)).encode()
    host, port = torch_server.base_url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        sock.shutdown(socket.SHUT_WR)
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        assert reply.status == 200 and json.loads(reply.read())["choices"][0]["message"]["content"]
    assert _health(torch_server)["dropped"] == 0
