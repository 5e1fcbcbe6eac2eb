"""Token and cost accounting: prices from the config's ``price_per_mtok``, estimates before any call.

A request not yet sent is counted (``rmb build --dry-run``, ``planning.PlanningClient``; ``max_cost``'s
reservations) at prompt tokens from its text (about four characters a token, plus a few per message for
the chat template) and completion tokens at its ``max_tokens`` bound: an upper estimate of one pass
without re-asks.
"""

from __future__ import annotations

import math

from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.types import ChatRequest

_CHARS_PER_TOKEN = 4.0
_TOKENS_PER_MESSAGE = 4


def cost_usd(endpoint: EndpointConfig, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for this many tokens at the endpoint's price (0 where it has none, e.g. embedded)."""
    price = endpoint.price_per_mtok
    if price is None:
        return 0.0
    return (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000


def estimate_prompt_tokens(req: ChatRequest) -> int:
    """A token count for the request's messages without a tokenizer or a call."""
    chars = sum(len(content) for _, content in req.messages)
    return math.ceil(chars / _CHARS_PER_TOKEN) + _TOKENS_PER_MESSAGE * len(req.messages) + 3
