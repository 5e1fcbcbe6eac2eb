"""LLMClient: every LLM call of a build, cached on disk, concurrent per endpoint, retried, budgeted.

    with LLMClient(cfg.endpoints, run_dir / "llm_cache", max_cost=5.0) as client:
        results = client.run(requests, desc="judge")          # from synchronous code, any thread
        results = await client.chat_many(requests, desc="judge")  # from any event loop

The client owns one event loop, in a background thread: every caller's requests run there, so an
endpoint's limits (concurrency, rpm, tpm) and the budget hold across threads and loops with plain
asyncio primitives. A response is committed to the cache before it is returned, so a run killed at
any moment and started again asks nothing twice. Failures come back as ``ChatResult.error`` and are
never raised out of a batch; only a config mistake (ConfigError, before any call) or the budget
(BudgetExceeded, after every finished response is stored) raise. A dry run asks a
``planning.PlanningClient`` instead, which sends nothing.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import functools
import logging
import math
import os
import re
import threading
from collections import defaultdict
from concurrent.futures import Future
from pathlib import Path
from typing import Any, AsyncIterator, Coroutine, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit

import openai
from tqdm.auto import tqdm

from rmb_build.core.errors import ConfigError
from rmb_build.core.extras import install_line
from rmb_build.core.redact import redact
from rmb_build.llm.budget import Budget, BudgetExceeded, BudgetStop
from rmb_build.llm.cache import ResponseCache, request_key
from rmb_build.llm.config import BACKEND_EXTRAS, EndpointConfig, backend_installed
from rmb_build.llm.cost import cost_usd, estimate_prompt_tokens
from rmb_build.llm.endpoint import endpoint_identity
from rmb_build.llm.limits import EndpointLimits
from rmb_build.llm.reply_cap import reply_cap
from rmb_build.llm.retry import CallFailure, RetryRules, classify
from rmb_build.llm.server import EmbeddedServer, ServerError, default_threads
from rmb_build.llm.silence import SilenceWatch
from rmb_build.llm.structured import ReplyError, parse_reply, reask_message
from rmb_build.llm.types import ChatRequest, ChatResult, Usage
from rmb_build.llm.wire import parse_completion, reply_tokens, request_body

__all__ = ["LLMClient", "BudgetExceeded"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_EMBEDDED_KEY = "<embedded>"  # all embedded endpoints share the embedded servers, one request each
_NO_KEY = "sk-no-key-required"  # local servers want some bearer token; this one is not a secret
_KEY_LIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-*]{6,}", re.I)


def _capped_http(ep: EndpointConfig) -> openai.DefaultAsyncHttpxClient:
    """The HTTP client under one endpoint's OpenAI client (the client's own defaults): replies over the
    endpoint's ``max_reply_bytes`` refused."""
    return openai.DefaultAsyncHttpxClient(event_hooks={"response": [reply_cap(ep.reply_limit)]})


def _usage_row() -> dict[str, Any]:
    return {
        "requests": 0,
        "cached": 0,
        "failed": 0,
        "retries": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
    }


def _close_loop_at_exit(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Close a client's loop that ``close()`` did not (a stop interrupted it, or it never ran)."""
    if loop.is_closed():
        return
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    if not loop.is_running():
        loop.close()


class LLMClient:
    """One client for all endpoints of a build config (see the module docstring).

    ``endpoints`` maps endpoint names to EndpointConfig; ``cache_dir`` holds the SQLite cache;
    ``max_cost`` (USD) stops a run before it would spend more. ``log_dir`` receives the embedded
    server's log (default: ``<cache_dir>/../logs``). ``retry_base_s``/``retry_max_s`` shape backoff.
    """

    def __init__(
        self,
        endpoints: Mapping[str, EndpointConfig],
        cache_dir: str | Path,
        *,
        max_cost: float | None = None,
        log_dir: str | Path | None = None,
        retry_base_s: float = 1.0,
        retry_max_s: float = 60.0,
        progress: bool | None = None,
        server_startup_timeout_s: float = 120.0,
    ):
        self.endpoints = dict(endpoints)
        self.cache = ResponseCache(cache_dir)
        self.log_dir = Path(log_dir) if log_dir else Path(cache_dir).resolve().parent / "logs"
        self.retry_base_s, self.retry_max_s = retry_base_s, retry_max_s
        self.progress = progress
        self.server_startup_timeout_s = server_startup_timeout_s
        self._budget = Budget(max_cost)
        self._servers: list[EmbeddedServer] = []
        self._server_lock = threading.Lock()
        self._usage_lock = threading.Lock()  # usage() is read from other threads
        self._usage: dict[tuple[str, str], dict[str, Any]] = defaultdict(_usage_row)
        # Per stage: requests handed to the client, and those resolved (answered, cached or failed).
        self._flow: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self._prompt_scale: dict[str, float] = {}
        # Everything below lives on the client's own loop.
        self._http_clients: dict[str, openai.AsyncOpenAI] = {}
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._limits_by_name: dict[str, EndpointLimits] = {}
        self._server_http: dict[tuple[str, int], openai.AsyncOpenAI] = {}  # (endpoint, server): its timeout
        self._idle_servers: asyncio.Queue[int] | None = None
        self._silence = SilenceWatch()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="llm-client", daemon=True)
        # a stop can come before close() ends: the loop is then closed at exit, not by its finaliser during the
        # interpreter's teardown (which found its self-pipe gone and printed a traceback under the stop's line)
        self._close_at_exit = functools.partial(_close_loop_at_exit, self._loop, self._thread)
        atexit.register(self._close_at_exit)
        self._thread.start()

    # ---- the client's event loop ---------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> "Future[T]":
        if self._closed:
            coro.close()
            raise RuntimeError("the LLM client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _on_own_loop(self) -> bool:
        return threading.current_thread() is self._thread

    # ---- endpoints and the embedded server -------------------------------------------------

    def _endpoint(self, name: str) -> EndpointConfig:
        try:
            return self.endpoints[name]
        except KeyError:
            raise ConfigError(
                "<config>",
                "endpoints",
                f"endpoint {name!r} is not configured (configured: {', '.join(self.endpoints) or 'none'})",
            ) from None

    def _embedded_models(self) -> list[str]:
        return list(dict.fromkeys(ep.embedded for ep in self.endpoints.values() if ep.embedded))

    def _embedded_servers(self) -> int:
        """How many server processes serve the embedded endpoints (they share them): the most any asks for."""
        return max((ep.servers for ep in self.endpoints.values() if ep.embedded), default=1)

    def _embedded_slots(self) -> int:
        """Requests one embedded server takes at once (llama.cpp: one; torch: its batch)."""
        return max((ep.server_slots for ep in self.endpoints.values() if ep.embedded), default=1)

    def _embedded_backend(self) -> str:
        """The one backend the embedded endpoints share (they share the servers), or a ConfigError."""
        backends = {name: ep.embedded_backend for name, ep in self.endpoints.items() if ep.embedded}
        if len(set(backends.values())) > 1:
            said = ", ".join(f"{n}: {b}" for n, b in backends.items())
            raise ConfigError(
                "<config>", "endpoints", f"the embedded endpoints share one server; backends differ ({said})"
            )
        backend = next(iter(backends.values()), "llama_cpp")
        if not backend_installed(backend):
            raise ServerError(
                f"the embedded {backend} backend is not installed: {install_line(BACKEND_EXTRAS[backend])}"
            )
        return backend

    def _ensure_servers(self) -> list[EmbeddedServer]:
        """The embedded servers, started on first use; a crashed one is a stop (with its log), never restarted."""
        with self._server_lock:
            if self._servers:
                for server in self._servers:
                    server.check_alive()
                return self._servers
            n_ctx = max(ep.n_ctx for ep in self.endpoints.values() if ep.embedded)
            count = self._embedded_servers()
            backend = self._embedded_backend()
            # the cores one server would have, shared (RMB_LLAMA_THREADS, where set, is each server's own)
            threads = None if count == 1 or os.environ.get("RMB_LLAMA_THREADS") else max(1, default_threads() // count)
            try:
                for i in range(count):
                    stem = "llama_server" if backend == "llama_cpp" else f"{backend}_server"
                    name = f"{stem}.log" if i == 0 else f"{stem}.{i}.log"
                    server = EmbeddedServer(
                        self._embedded_models(),
                        n_ctx=n_ctx,
                        log_path=self.log_dir / name,
                        startup_timeout_s=self.server_startup_timeout_s,
                        n_threads=threads,
                        backend=backend,
                        max_batch=self._embedded_slots(),
                    )
                    self._servers.append(server)
                    server.start()
            except BaseException:
                for server in self._servers:
                    server.stop()
                self._servers = []
                raise
            return self._servers

    def base_url(self, endpoint_name: str) -> str:
        """The endpoint's URL; for an embedded endpoint this starts the server(s) and gives the first's port."""
        ep = self._endpoint(endpoint_name)
        return self._ensure_servers()[0].base_url if ep.embedded else str(ep.base_url)

    def _describe(self, name: str) -> str:
        """An endpoint as an error line names it: its name and where it is (no credential)."""
        return f"{name!r} ({endpoint_identity(self._endpoint(name))})"

    def _check(self, reqs: Sequence[ChatRequest]) -> None:
        for i, req in enumerate(reqs):
            ep = self._endpoint(req.endpoint)
            if ep.embedded and req.model != ep.embedded:
                raise ConfigError(
                    "<config>",
                    "model",
                    f"request {i} ({req.tag or req.stage or 'untagged'}) asks "
                    f"embedded endpoint {req.endpoint!r} for model {req.model!r}; it serves only {ep.embedded!r}",
                )

    async def _http(self, name: str, ep: EndpointConfig) -> openai.AsyncOpenAI:
        if name not in self._http_clients:
            self._http_clients[name] = openai.AsyncOpenAI(
                base_url=ep.base_url,
                api_key=ep.api_key() or _NO_KEY,
                timeout=ep.timeout_s,
                max_retries=0,
                http_client=_capped_http(ep),
            )
        return self._http_clients[name]

    @contextlib.asynccontextmanager
    async def _connection(self, name: str, ep: EndpointConfig) -> AsyncIterator[openai.AsyncOpenAI]:
        """The HTTP client for one call: the endpoint's, or for an embedded endpoint an idle server's, held
        for the call (the endpoint's slot, one per server, guarantees one is idle)."""
        if not ep.embedded:
            yield await self._http(name, ep)
            return
        if self._idle_servers is None:
            servers = await asyncio.to_thread(self._ensure_servers)
            if self._idle_servers is None:  # another call may have set it up while the servers started
                self._idle_servers = asyncio.Queue()
                for _ in range(self._embedded_slots()):  # a torch server takes its batch at once
                    for i in range(len(servers)):
                        self._idle_servers.put_nowait(i)
        i = await self._idle_servers.get()
        try:
            if (name, i) not in self._server_http:
                self._server_http[name, i] = openai.AsyncOpenAI(
                    base_url=self._servers[i].base_url,
                    api_key=_NO_KEY,
                    timeout=ep.timeout_s,
                    max_retries=0,
                    http_client=_capped_http(ep),
                )
            yield self._server_http[name, i]
        finally:
            self._idle_servers.put_nowait(i)

    def _limits(self, name: str, ep: EndpointConfig) -> EndpointLimits:
        """The endpoint's concurrency slots (the embedded endpoints share one per embedded server) and rate
        buckets."""
        if name not in self._limits_by_name:
            key = _EMBEDDED_KEY if ep.embedded else name
            if key not in self._semaphores:
                slots = self._embedded_servers() * self._embedded_slots() if ep.embedded else (ep.max_concurrency or 8)
                self._semaphores[key] = asyncio.Semaphore(slots)
            self._limits_by_name[name] = EndpointLimits(self._semaphores[key], ep.rpm, ep.tpm)
        return self._limits_by_name[name]

    # ---- budget and accounting -------------------------------------------------------------------

    @property
    def max_cost(self) -> float | None:
        return self._budget.max_cost

    @max_cost.setter
    def max_cost(self, value: float | None) -> None:
        self._budget.max_cost = value

    @property
    def spent_usd(self) -> float:
        return self._budget.spent

    def _account(self, req: ChatRequest, **deltas: float) -> None:
        with self._usage_lock:
            row = self._usage[(req.stage, req.model)]
            for k, v in deltas.items():
                row[k] += v

    def usage(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{stage: {model: {requests, cached, failed, retries, prompt_tokens, completion_tokens, cost_usd}}}``.

        Tokens and cost count what this client spent (calls made), not what the cache served.
        """
        out: dict[str, dict[str, dict[str, Any]]] = {}
        with self._usage_lock:
            for (stage, model), row in sorted(self._usage.items()):
                out.setdefault(stage, {})[model] = dict(row)
        return out

    def flow(self, stage: str) -> tuple[int, int]:
        """``(resolved, asked)``: of the requests ``stage`` handed this client so far, how many have an
        outcome (answered, cached or failed): a long batch's progress, request by request."""
        with self._usage_lock:
            resolved, asked = self._flow.get(stage, (0, 0))
        return resolved, asked

    def _resolved(self, req: ChatRequest) -> None:
        """``req`` has its outcome (see ``flow``)."""
        with self._usage_lock:
            self._flow[req.stage][0] += 1

    def _observe_prompt(self, endpoint: str, actual: int, estimated: int) -> None:
        """Learn how far the character-based estimate undercounts (chat templates, system prompts)."""
        if actual > 0 and estimated > 0:
            self._prompt_scale[endpoint] = max(self._prompt_scale.get(endpoint, 1.0), actual / estimated)

    def _scrub(self, text: str, ep: EndpointConfig) -> str:
        """``text`` without the endpoint's API key, URL credentials or anything shaped like a key."""
        if ep.base_url:
            password = urlsplit(ep.base_url).password
            if password:
                text = text.replace(password, "***")
        key = ep.api_key()
        if key:
            text = text.replace(key, "***")
        return redact(_KEY_LIKE.sub(lambda m: m.group(1) + "-***", text))

    # ---- one call, with retries -----------------------------------------------------------------

    async def _attempt(
        self,
        limits: EndpointLimits,
        req: ChatRequest,
        ep: EndpointConfig,
        body: dict[str, Any],
        est_prompt: int,
        result: ChatResult,
    ) -> dict[str, Any] | CallFailure:
        """One HTTP call inside the endpoint's limits and the budget: the reply as cached, or why not."""
        async with limits.slot(est_prompt + req.max_tokens) as slot, self._connection(req.endpoint, ep) as http:
            # Reserved inside the slot: only calls about to be sent hold budget.
            scale = self._prompt_scale.get(req.endpoint, 1.0)
            reserved = self._budget.reserve(cost_usd(ep, math.ceil(est_prompt * scale), req.max_tokens))
            spent = 0.0
            try:
                result.attempts += 1
                # The official client's own transport, auth, timeouts and error types, without its
                # per-call pydantic transform and parse (they cost more CPU than the HTTP round trip).
                try:  # a total deadline: a per-read timeout restarts with every byte a trickling endpoint sends
                    reply = await asyncio.wait_for(
                        http.post("/chat/completions", cast_to=object, body=body), ep.deadline
                    )
                except asyncio.TimeoutError:
                    return CallFailure("timeout", f"no whole reply within deadline_s {ep.deadline:g}s")
                self._silence.heard(req.endpoint)
                if not isinstance(reply, dict):
                    raise TypeError(f"the reply is a JSON {type(reply).__name__}, not an object")
                prompt, completion = reply_tokens(reply)
                spent = cost_usd(ep, prompt, completion)
                resp = parse_completion(reply)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every API failure is classified, then retried or recorded
                if isinstance(exc, openai.APIStatusError):
                    self._silence.heard(req.endpoint)  # an answer, if not the one asked for
                return classify(exc)
            finally:
                self._budget.settle(reserved, spent)
            self._observe_prompt(req.endpoint, prompt, est_prompt)
            slot.used(prompt + completion)
            return resp

    async def _send(
        self, req: ChatRequest, ep: EndpointConfig, messages: list[tuple[str, str]], result: ChatResult
    ) -> dict[str, Any] | str:
        """One answer for ``messages`` (a response dict), or why there is none (a string)."""
        limits = self._limits(req.endpoint, ep)
        body = request_body(req, ep, messages)
        est_prompt = estimate_prompt_tokens(ChatRequest(req.endpoint, req.model, tuple(messages)))
        rules = RetryRules(ep.max_retries, ep.outage_limit_s, self.retry_base_s, self.retry_max_s)
        self._silence.asking(req.endpoint)
        try:
            return await self._send_until_done(req, ep, limits, body, est_prompt, rules, result)
        finally:
            self._silence.done(req.endpoint)

    async def _send_until_done(
        self,
        req: ChatRequest,
        ep: EndpointConfig,
        limits: EndpointLimits,
        body: dict[str, Any],
        est_prompt: int,
        rules: RetryRules,
        result: ChatResult,
    ) -> dict[str, Any] | str:
        while True:
            got = await self._attempt(limits, req, ep, body, est_prompt, result)
            if not isinstance(got, CallFailure):
                return got
            failure = CallFailure(got.kind, self._scrub(got.reason, ep), got.retry_after)
            self._silence.last_failure[req.endpoint] = failure.reason
            if ep.embedded:
                for server in self._servers:  # a crashed local server is a stop for the run, not an outage to wait out
                    server.check_alive()
            wait = rules.next(failure, result.attempts)
            if isinstance(wait, str):
                return wait
            self._account(req, retries=1)
            log.debug("%s %s: %s; retrying in %.2fs", req.endpoint, req.tag, failure.reason, wait)
            await asyncio.sleep(wait)

    # ---- one request: cache, send, parse, re-ask ----------------------------------------------

    def _apply(self, result: ChatResult, resp: dict[str, Any]) -> None:
        result.text = resp["text"]
        result.finish_reason = resp.get("finish_reason")
        u = resp.get("usage") or {}
        result.usage = Usage(
            result.usage.prompt_tokens + u.get("prompt_tokens", 0),
            result.usage.completion_tokens + u.get("completion_tokens", 0),
        )
        result.logprobs = resp.get("logprobs")
        result.raw_texts.append(resp["text"])

    def _resolve_cached(self, req: ChatRequest, resp: dict[str, Any]) -> ChatResult | None:
        """A finished result from a cached first answer, or None when it needs a re-ask."""
        result = ChatResult(req, cached=True)
        self._apply(result, resp)
        if req.response_schema is not None:
            try:
                result.parsed = parse_reply(result.text, req.response_schema)
            except ReplyError:
                return None
        return result

    async def _resolve(self, req: ChatRequest, key: str, first: dict[str, Any] | None) -> ChatResult:
        ep = self.endpoints[req.endpoint]
        ident = endpoint_identity(ep)
        result = ChatResult(req)
        messages = list(req.messages)
        rounds = 1 + (req.max_reasks if req.response_schema is not None else 0)
        for rnd in range(rounds):
            k = key if rnd == 0 else request_key(req, ident, ep.structured_output, messages)
            resp = first if rnd == 0 else self.cache.get(k)
            if resp is None:
                got = await self._send(req, ep, messages, result)
                if isinstance(got, str):
                    result.error = got
                    break
                resp = got
                self.cache.put(k, resp, endpoint=ident, endpoint_name=req.endpoint, model=req.model, stage=req.stage)
                u = resp["usage"]
                spent = cost_usd(ep, u["prompt_tokens"], u["completion_tokens"])
                result.cost_usd += spent
                self._account(
                    req,
                    requests=1,
                    prompt_tokens=u["prompt_tokens"],
                    completion_tokens=u["completion_tokens"],
                    cost_usd=spent,
                )
            self._apply(result, resp)
            if req.response_schema is None:
                break
            try:
                result.parsed = parse_reply(result.text, req.response_schema)
                break
            except ReplyError as exc:
                if rnd == rounds - 1:
                    result.error = f"reply does not fit the schema after {req.max_reasks} re-asks: {exc}"
                else:
                    messages += [
                        ("assistant", result.text or ""),
                        ("user", reask_message(str(exc), req.response_schema)),
                    ]
        result.cached = result.attempts == 0 and result.error is None
        self._account(req, **({"failed": 1} if result.error else {"cached": 1} if result.cached else {}))
        return result

    # ---- batches --------------------------------------------------------------------------------

    async def _chat_many(self, reqs: list[ChatRequest], desc: str, progress: bool | None) -> list[ChatResult]:
        """chat_many, on the client's loop."""
        self._check(reqs)
        with self._usage_lock:
            for r in reqs:
                self._flow[r.stage][1] += 1
        keys = [
            request_key(r, endpoint_identity(self.endpoints[r.endpoint]), self.endpoints[r.endpoint].structured_output)
            for r in reqs
        ]
        firsts = await asyncio.to_thread(self.cache.get_many, keys) if len(keys) > 200 else self.cache.get_many(keys)
        results: list[ChatResult | None] = [None] * len(reqs)
        pending: list[int] = []
        repeats: dict[int, int] = {}  # a request the batch already asks (same key): answered by the first's reply
        first_of: dict[str, int] = {}
        for i, (req, key) in enumerate(zip(reqs, keys)):
            resp = firsts.get(key)
            done = self._resolve_cached(req, resp) if resp is not None else None
            if done is not None:
                results[i] = done
                self._account(req, cached=1)
                self._resolved(req)
            elif key in first_of:
                repeats[i] = first_of[key]
            else:
                first_of[key] = i
                pending.append(i)
        show = self.progress if progress is None else progress
        bar = tqdm(
            total=len(reqs),
            initial=len(reqs) - len(pending),
            desc=desc,
            unit="req",
            disable=None if show is None else not show,
            leave=False,
        )
        stopped = asyncio.Event()
        window = asyncio.Semaphore(max(64, 4 * sum(ep.max_concurrency or 8 for ep in self.endpoints.values())))

        async def one(i: int) -> None:
            try:
                if not stopped.is_set():
                    results[i] = await self._resolve(reqs[i], keys[i], firsts.get(keys[i]))
            except BudgetStop:
                stopped.set()
            finally:
                window.release()
                bar.update(1)
                self._resolved(reqs[i])

        tasks = []

        async def send_all() -> None:
            for i in pending:
                await window.acquire()
                if stopped.is_set():
                    window.release()
                    break
                tasks.append(asyncio.create_task(one(i)))
            await asyncio.gather(*tasks)

        try:
            limits = {r.endpoint: self.endpoints[r.endpoint].silence_limit for r in reqs}
            await self._silence.guard(send_all(), limits, self._describe)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            bar.close()
        for i, first in repeats.items():
            answer = results[first]
            if answer is not None:
                results[i] = self._repeat(reqs[i], answer)
            self._resolved(reqs[i])
        if stopped.is_set():
            answered = sum(r is not None for r in results)
            raise BudgetExceeded(
                f"stopped before passing max_cost ${self.max_cost:g} (spent ${self.spent_usd:.4f} in "
                f"this run; {answered} of {len(reqs)} requests of '{desc}' answered and cached); "
                "run again with a higher --max-cost to resume"
            )
        return results  # type: ignore[return-value]

    def _repeat(self, req: ChatRequest, first: ChatResult) -> ChatResult:
        """``first``'s answer for a request the same batch asked before (the cache would have answered it)."""
        result = dataclasses.replace(first, request=req, raw_texts=list(first.raw_texts), attempts=0, cost_usd=0.0)
        result.cached = first.error is None
        self._account(req, **({"failed": 1} if first.error else {"cached": 1}))
        return result

    async def chat_many(
        self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None
    ) -> list[ChatResult]:
        """Results for ``reqs`` in order, from any event loop; API failures come back with ``error``
        set, never raised. Cancelling the caller cancels the batch on the client's loop.

        Raises ConfigError before any call for an unknown endpoint or model, and BudgetExceeded
        once in-flight calls have finished (and been cached) when the next call would pass max_cost.
        """
        batch = self._chat_many(list(reqs), desc, progress)
        if self._on_own_loop():
            return await batch
        return await asyncio.wrap_future(self._submit(batch))

    async def chat(self, req: ChatRequest) -> ChatResult:
        """One request (see chat_many)."""
        return (await self.chat_many([req], progress=False))[0]

    def run(self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None) -> list[ChatResult]:
        """chat_many from synchronous code in any thread (not from a coroutine on the client's own loop)."""
        if self._on_own_loop():
            raise RuntimeError("LLMClient.run would block the client's own loop: await chat_many there")
        future = self._submit(self._chat_many(list(reqs), desc, progress))
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. Ctrl-C while waiting: stop the batch on the client's loop too
            raise

    # ---- lifetime ---------------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        current = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not current]
        for t in others:
            t.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        for http in [*self._http_clients.values(), *self._server_http.values()]:
            await http.close()
        self._http_clients.clear()
        self._server_http.clear()

    def close(self) -> None:
        """Stop the client's loop, the embedded server (if started) and close the cache."""
        if self._closed:
            return
        if self._on_own_loop():
            raise RuntimeError("LLMClient.close cannot run on the client's own loop")
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=60)
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(60)
            if not self._loop.is_running():
                self._loop.close()
                atexit.unregister(self._close_at_exit)
            with self._server_lock:
                servers, self._servers = self._servers, []
            for server in servers:
                server.stop()
            self.cache.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> "LLMClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.to_thread(self.close)
