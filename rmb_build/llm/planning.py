"""A dry run's client: the build's own stages ask it, it answers from the run's cache and sends nothing.

``PlanningClient`` has ``LLMClient.chat_many``'s signature, so a dry run runs the very stage functions
a build runs, in the same order, and every request they make is planned exactly as it will be sent.
A request the cache answers comes back with its cached reply (a resumed or repeated build's answers
are real, so the requests after them are the real ones too). A request the cache cannot answer is
counted once (requests the cache would tell apart are counted apart, and no others) and answered with
a stand-in so that the stages after it can still plan:

- an answer (a request without a schema whose stage is one of ``answer_stages``: ``generate``'s answers,
  the style stage's rewrites) stands in as a distinct text of the request's whole ``max_tokens``, so no
  two generators' answers merge and every answer is judged (an upper bound: a real answer cut at
  ``max_tokens``, or a rewrite that failed or repeats another, is not judged);
- any other reply stands in empty, which every stage reads as "no readable reply": a guard verdict is
  unknown (goal routing then keeps the classifier's label, so its top-up rounds are not planned: they
  are reported as an estimate by the caller).

A build's stage asks ``for_phase(stage)``, a view whose requests count under that stage, so stages that
plan side by side (the build's concurrent chains) each count their own; the view has the endpoints the
planner has, as the build's stages read them off the build's client (a request's input budget is the
endpoint's context). ``watch()`` counts the stand-ins given within one part of the work (one batch's
chain: whether what it built is the build's own). ``report()`` gives calls, tokens and cost per phase and
endpoint, each figure labelled exact or estimate.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

from rmb_build.core.errors import ConfigError
from rmb_build.llm.cache import ResponseCache, request_key
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.cost import cost_usd, estimate_prompt_tokens
from rmb_build.llm.endpoint import endpoint_identity
from rmb_build.llm.structured import ReplyError, parse_reply
from rmb_build.llm.tokens import exact_counter
from rmb_build.llm.types import ChatRequest, ChatResult, Usage

ANSWER_STAGES = ("generate",)  # a planner's default: the stage whose replies are answers


@dataclass
class Watched:
    """What :meth:`PlanningClient.watch` saw: requests asked within it, and how many a stand-in answered."""

    asked: int = 0
    stand_ins: int = 0


_WATCHING: ContextVar[Watched | None] = ContextVar("rmb_planning_watch", default=None)


@dataclass
class PlannedCall:
    """One distinct request of the plan: where it was first asked, and its reply when cached."""

    request: ChatRequest
    phase: str
    cached: dict[str, Any] | None


def stand_in_answer(req: ChatRequest, key: str) -> str:
    """A text of about ``max_tokens`` tokens (3 bytes a token), distinct for every distinct request."""
    return f"[{key[:12]}] " + " ".join(["word"] * max(req.max_tokens * 3 // 5, 1))


class PlanningClient:
    """Answers from ``cache`` (None: nothing cached) and records every request; sends nothing.
    ``answer_stages``: the stages whose schema-less replies are answers (a distinct stand-in text each)."""

    def __init__(
        self,
        endpoints: Mapping[str, EndpointConfig],
        cache: ResponseCache | None = None,
        answer_stages: Collection[str] = ANSWER_STAGES,
    ):
        self.endpoints = dict(endpoints)
        self.cache = cache
        self.answer_stages = frozenset(answer_stages)
        self.calls: dict[str, PlannedCall] = {}

    @classmethod
    def reading(
        cls,
        endpoints: Mapping[str, EndpointConfig],
        cache_dir: str | Path,
        answer_stages: Collection[str] = ANSWER_STAGES,
    ) -> "PlanningClient":
        """A planner on the run's cache in ``cache_dir``, read as it is (none there: nothing cached)."""
        cache = ResponseCache(cache_dir, create=False) if Path(cache_dir).exists() else None
        return cls(endpoints, cache, answer_stages)

    @staticmethod
    @contextlib.contextmanager
    def watch() -> Iterator[Watched]:
        """Counts the requests planned within this block (this task's, and the tasks it starts) and the
        stand-ins among them: none means every reply the block read was a real one, from the cache."""
        seen = Watched()
        token = _WATCHING.set(seen)
        try:
            yield seen
        finally:
            _WATCHING.reset(token)

    def for_phase(self, name: str) -> "PhasePlanner":
        """A view whose requests are counted under ``name`` (classify, gold, route, generate, judge, guard)."""
        return PhasePlanner(self, name)

    def usage(self) -> dict[str, Any]:
        """What the plan spent: nothing (it sends no request)."""
        return {}

    def flow(self, stage: str) -> tuple[int, int]:
        """Requests with an outcome of those asked (``LLMClient.flow``): a plan resolves none."""
        return 0, 0

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> "PlanningClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def key(self, req: ChatRequest) -> str:
        """The request's cache key; ConfigError for an endpoint the config does not define."""
        if req.endpoint not in self.endpoints:
            raise ConfigError(
                "<requests>",
                "endpoint",
                f"a {req.stage or 'planned'} request names endpoint "
                f"{req.endpoint!r}, which is not configured (configured: {', '.join(self.endpoints) or 'none'})",
            )
        ep = self.endpoints[req.endpoint]
        return request_key(req, endpoint_identity(ep), ep.structured_output)

    async def chat_many(
        self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None
    ) -> list[ChatResult]:
        return self.plan(reqs, desc)

    def run(self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None) -> list[ChatResult]:
        """``LLMClient.run``'s signature, for what asks synchronously (a generative reward model)."""
        return self.plan(reqs, desc)

    def plan(self, reqs: Sequence[ChatRequest], desc: str = "llm", phase: str = "") -> list[ChatResult]:
        """Record ``reqs`` (a request first asked counts under ``phase``, else its stage); a result for
        each: the cached reply, or a stand-in."""
        keys = [self.key(r) for r in reqs]
        cached = self.cache.get_many(keys) if self.cache is not None else {}
        out = []
        for req, key in zip(reqs, keys):
            if key not in self.calls:
                self.calls[key] = PlannedCall(req, phase or req.stage or desc, cached.get(key))
            out.append(self._result(req, key, cached.get(key)))
        watched = _WATCHING.get()
        if watched is not None:
            watched.asked += len(keys)
            watched.stand_ins += sum(1 for key in keys if key not in cached)
        return out

    def is_answer(self, req: ChatRequest) -> bool:
        """Whether the plan stands in for ``req``'s reply with an answer's text (else an empty reply)."""
        return req.response_schema is None and req.stage in self.answer_stages

    def _result(self, req: ChatRequest, key: str, resp: dict[str, Any] | None) -> ChatResult:
        result = ChatResult(req, cached=resp is not None)
        if resp is None:
            result.text = stand_in_answer(req, key) if self.is_answer(req) else ""
            result.finish_reason = "stop"
            return result
        result.text, result.finish_reason = resp["text"], resp.get("finish_reason")
        usage = resp.get("usage") or {}
        result.usage = Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        if req.response_schema is not None:
            try:
                result.parsed = parse_reply(result.text, req.response_schema)
            except ReplyError as exc:  # the build re-asks; the plan reads it as no reply
                result.error = str(exc)
        return result

    def report(self) -> dict[str, Any]:
        """Calls still to send and those cached, tokens and USD, in total, per phase, endpoint and model.

        ``prompt_tokens`` of a call to send is counted by ``tokens.py``: exact with an embedded model's own
        tokenizer and template, else estimated from the rendered messages and scaled by the cached replies'
        real counts (``prompt_tokens_method`` says which, per endpoint); ``completion_tokens`` is its
        ``max_tokens`` (an upper bound) and ``completion_tokens_estimate`` the mean completion of the cached
        replies of the same endpoint, model and phase where there are any (else ``max_tokens``). ``cost_usd``
        is at the upper bound. Re-asks of replies that do not fit a schema are not counted.
        """
        means = self._cached_completion_means()
        counters = {name: self._prompt_counter(name) for name in {c.request.endpoint for c in self.calls.values()}}
        total = _row()
        phases: dict[str, dict[str, Any]] = defaultdict(_row)
        endpoints: dict[str, dict[str, Any]] = defaultdict(_row)
        models: dict[str, dict[str, Any]] = defaultdict(_row)
        for call in self.calls.values():
            req = call.request
            for row in (total, phases[call.phase], endpoints[req.endpoint], models[f"{req.endpoint}/{req.model}"]):
                if call.cached is not None:
                    row["cached"] += 1
                    continue
                prompt = counters[req.endpoint][0](req)
                mean = means.get((req.endpoint, req.model, call.phase))
                row["calls"] += 1
                row["prompt_tokens"] += prompt
                row["completion_tokens"] += req.max_tokens
                row["completion_tokens_estimate"] += round(mean) if mean is not None else req.max_tokens
                row["cost_usd"] += cost_usd(self.endpoints[req.endpoint], prompt, req.max_tokens)
        return {
            **total,
            "by_phase": dict(phases),
            "by_endpoint": dict(endpoints),
            "by_model": dict(models),
            "prompt_tokens_method": {name: method for name, (_, method) in sorted(counters.items())},
        }

    def _prompt_counter(self, endpoint: str) -> tuple[Callable[[ChatRequest], int], str]:
        """How this plan counts a request's prompt tokens on ``endpoint``, and what that count is."""
        exact = exact_counter(self.endpoints[endpoint])
        if exact is not None:
            return exact, "exact: the embedded model's own tokenizer and chat template"
        pairs = [
            (u["prompt_tokens"], estimate_prompt_tokens(c.request))
            for c in self.calls.values()
            if c.request.endpoint == endpoint
            and c.cached is not None
            and isinstance(u := (c.cached.get("usage") or {}), dict)
            and u.get("prompt_tokens")
        ]
        if not pairs:
            return estimate_prompt_tokens, "estimate: about 4 characters a token"
        scale = sum(a for a, _ in pairs) / sum(e for _, e in pairs)
        return (
            lambda req: round(estimate_prompt_tokens(req) * scale),
            f"estimate: 4 characters a token, scaled by {scale:.3f} from {len(pairs)} cached replies' real counts",
        )

    def _cached_completion_means(self) -> dict[tuple[str, str, str], float]:
        sums: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for call in self.calls.values():
            if call.cached is not None:
                tokens = (call.cached.get("usage") or {}).get("completion_tokens")
                if isinstance(tokens, int):
                    sums[(call.request.endpoint, call.request.model, call.phase)].append(tokens)
        return {k: sum(v) / len(v) for k, v in sums.items()}


class PhasePlanner:
    """A :class:`PlanningClient` as one stage asks it: its requests counted under that stage; the endpoints
    are the planner's (a stage reads its input budget off them, as it does off the build's client)."""

    def __init__(self, planner: PlanningClient, phase: str):
        self.planner, self.phase = planner, phase

    @property
    def endpoints(self) -> dict[str, EndpointConfig]:
        return self.planner.endpoints

    async def chat_many(
        self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None
    ) -> list[ChatResult]:
        return self.planner.plan(reqs, desc, self.phase)

    def run(self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None) -> list[ChatResult]:
        return self.planner.plan(reqs, desc, self.phase)


def _row() -> dict[str, Any]:
    return {
        "calls": 0,
        "cached": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "completion_tokens_estimate": 0,
        "cost_usd": 0.0,
    }


__all__ = ["PhasePlanner", "PlannedCall", "PlanningClient", "Watched", "stand_in_answer"]
