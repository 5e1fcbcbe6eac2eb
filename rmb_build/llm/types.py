"""The records every LLM call goes through: a request (what changes the answer) and its result.

A request's cache key is built from exactly the fields that change the answer: the endpoint's
identity, model, messages, sampling parameters, response format and sample index. Never from the
API key, timeout, retry count, stage or tag (those only describe how and why we asked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, TypedDict


@dataclass(frozen=True)
class ChatRequest:
    endpoint: str  # name of an endpoint in the build config
    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content) pairs, hashable
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 512
    seed: int | None = None  # sent as seed + sample_index, so repeated samples differ
    sample_index: int = 0  # k-th of repeated samples of the same request
    response_schema: dict[str, Any] | None = None  # JSON schema the reply must follow
    schema_name: str = "reply"
    top_logprobs: int | None = None  # ask for token logprobs (chat top_logprobs)
    stop: tuple[str, ...] = ()  # stop sequences (the reply ends before one, finish_reason "stop")
    max_reasks: int = 2  # re-asks when a reply does not fit response_schema; not part of the key
    stage: str = ""  # accounting only, not part of the key
    tag: str = ""  # caller's label (e.g. an item uid), not part of the key

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


class RequestFields(TypedDict, total=False):
    """What a stage's request says beyond its model's settings (``ModelRef.request``): ChatRequest's fields."""

    max_tokens: int
    seed: int | None
    sample_index: int
    response_schema: dict[str, Any] | None
    schema_name: str
    stop: tuple[str, ...]
    max_reasks: int


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ChatResult:
    """What came back. Failures are recorded (``error`` set), never raised out of a batch."""

    request: ChatRequest
    text: str | None = None
    parsed: Any = None  # the reply parsed against response_schema, when one was given
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    logprobs: list[dict[str, Any]] | None = None  # [{"token", "logprob", "top": [{"token","logprob"}]}]
    cached: bool = False
    error: str | None = None  # why it finally failed (after retries / re-asks)
    attempts: int = 0  # HTTP calls made for this result (0 when fully cached)
    cost_usd: float = 0.0  # spent on this result in this run (0 when cached)
    raw_texts: list[str] = field(default_factory=list)  # every reply received, re-asked ones included

    @property
    def ok(self) -> bool:
        return self.error is None


class ChatClient(Protocol):
    """What a stage asks its requests of: the build's ``LLMClient``, or in a dry run a planner's view
    (``llm/planning.py``'s ``PhasePlanner``), which answers from the cache or with stand-ins."""

    async def chat_many(
        self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None
    ) -> list[ChatResult]: ...

    def run(
        self, reqs: Sequence[ChatRequest], desc: str = "llm", *, progress: bool | None = None
    ) -> list[ChatResult]: ...
