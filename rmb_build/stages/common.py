"""What the LLM stages share: fitting long texts into a context, asking the client, reading answers."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence, TypeVar

from rmb_build.core.records import Query, Response
from rmb_build.core.text import unfinished_text
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.types import ChatClient, ChatRequest, ChatResult

T = TypeVar("T")

# Context budgets are estimated, not tokenised: one token per 3 UTF-8 bytes errs on the safe side
# for English (~4 chars/token) and for CJK (~1 token/char, 3 bytes/char).
BYTES_PER_TOKEN = 3
EMBEDDED_CONTEXT_MARGIN = 64  # tokens for the chat template and the estimate's error
REMOTE_INPUT_TOKENS = 60_000  # fits every current API model; 5 MB answers are cut to this
DEFAULT_INPUT_TOKENS = 3_000  # when the endpoint is unknown: fits a 4k-context model
MIN_KEEP_CHARS = 200


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def input_token_budget(endpoint: EndpointConfig | None, max_tokens: int, overhead_tokens: int = 0) -> int:
    """Tokens left for conversation/answer text on ``endpoint`` (an EndpointConfig, or None if unknown)
    once the reply (``max_tokens``) and the prompt's fixed text (``overhead_tokens``) are set aside."""
    if endpoint is None:
        budget = DEFAULT_INPUT_TOKENS
    elif getattr(endpoint, "embedded", None):
        budget = endpoint.n_ctx - max_tokens - EMBEDDED_CONTEXT_MARGIN
    else:
        budget = REMOTE_INPUT_TOKENS
    return max(budget - overhead_tokens, 64)


def cut_middle(text: str, max_chars: int) -> str:
    """``text`` shortened to about ``max_chars``: head (2/3) and tail (1/3) kept, the cut marked."""
    if len(text) <= max_chars:
        return text
    keep = max(max_chars, MIN_KEEP_CHARS)
    head, tail = keep * 2 // 3, keep // 3
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[len(text) - tail :]}"


def fit_texts(texts: Sequence[str], max_tokens: int) -> tuple[list[str], int]:
    """Cut the longest of ``texts`` so their estimated tokens fit ``max_tokens``; short texts stay whole.

    Water-filling: find the largest per-text cap c with sum(min(tokens_i, c)) <= max_tokens, then cut
    every text above c. Returns the texts and how many characters were cut in all.
    """
    costs = [estimate_tokens(t) for t in texts]
    if sum(costs) <= max_tokens:
        return list(texts), 0
    remaining, cap = max_tokens, 0
    ordered = sorted(costs)
    for i, c in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if c > share:
            cap = share
            break
        remaining -= c
    out, cut = [], 0
    for text, cost in zip(texts, costs):
        if cost > cap:
            short = cut_middle(text, max(cap * len(text) // max(cost, 1), 1))
            cut += max(len(text) - len(short), 0)
            text = short
        out.append(text)
    return out, cut


def endpoint_of(
    client: object, name: str, endpoints: Mapping[str, EndpointConfig] | None = None
) -> EndpointConfig | None:
    """The EndpointConfig called ``name``, from ``endpoints`` or the client's config; None if unknown."""
    if endpoints is not None and name in endpoints:
        return endpoints[name]
    known = getattr(client, "endpoints", None)
    if isinstance(known, Mapping):
        return known.get(name)
    return None


def endpoints_of(
    client: object, endpoints: Mapping[str, EndpointConfig] | None = None
) -> Mapping[str, EndpointConfig] | None:
    """The endpoints an LLM stage plans with: ``endpoints`` where given, else the client's own (the build's
    client and a planner's view carry the config's); None where neither is known."""
    if endpoints is not None:
        return endpoints
    known = getattr(client, "endpoints", None)
    return known if isinstance(known, Mapping) else None


TRUNCATED = "length"  # finish_reason of an answer cut at max_tokens
CUT_AT_MAX_TOKENS = "cut at max_tokens"


def unfinished(r: Response) -> str | None:
    """Why an answer is not one its model finished (None when it is): cut at ``max_tokens``, or a text that
    stops at a lead-in or inside a code fence (``text.unfinished_text``). A server reports ``stop`` for a
    stop string as for a natural end, so release generators set none (``GeneratorConfig.stop``)."""
    if r.finish_reason == TRUNCATED:
        return CUT_AT_MAX_TOKENS
    return unfinished_text(r.text)


def finished(responses: Iterable[Response]) -> list[Response]:
    """The finished answers (``unfinished``): the only ones worth judging, guarding or pairing."""
    return [r for r in responses if unfinished(r) is None]


def finished_only(_section: object, answers: Sequence[Response]) -> list[Response]:
    """A verdict stage's ``takes`` (judge, guard): its section aside, the finished answers; an answer cut at
    max_tokens never reaches a release, so no call is spent on it."""
    return finished(answers)


def index_queries(queries: Iterable[Query]) -> dict[str, Query]:
    """Queries by id; the first of several with the same id wins (callers count the repeats)."""
    out: dict[str, Query] = {}
    for q in queries:
        out.setdefault(q.id, q)
    return out


def responses_by_query(responses: Iterable[Response]) -> dict[str, list[Response]]:
    out: dict[str, list[Response]] = {}
    for r in responses:
        out.setdefault(r.query_id, []).append(r)
    return out


async def ask(client: ChatClient, requests: Sequence[ChatRequest], desc: str) -> list[ChatResult]:
    """Run ``requests`` through the LLM layer; one ChatResult per request, in order."""
    if not requests:
        return []
    results = await client.chat_many(requests, desc=desc)
    if len(results) != len(requests):  # a broken client must not misalign results silently
        raise RuntimeError(f"{desc}: {len(requests)} requests but {len(results)} results")
    return list(results)
