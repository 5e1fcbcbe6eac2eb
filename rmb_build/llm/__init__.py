"""The LLM layer: one cached, concurrent, fault-tolerant client for every LLM call, and an embedded local model.

    from rmb_build.llm import LLMClient, ChatRequest
    with LLMClient(cfg.endpoints, run_dir / "llm_cache") as client:
        results = client.run([ChatRequest("local", "smollm2", (("user", "Hi"),), max_tokens=16)])

The embedded models (SmolLM2-135M-Instruct; optionally Gemma 3 270M, a base model) make the
toolkit run with no network, but they are far too small to judge or guard well (SmolLM2 scores
"2+2=4" as 2/10). For a real benchmark point the same config at a real endpoint:

    endpoints:
      vllm:   {base_url: http://gpu-box:8000/v1, structured_output: json_schema, max_concurrency: 64}
      openai: {base_url: https://api.openai.com/v1, api_key_env: OPENAI_API_KEY, rpm: 500,
               price_per_mtok: {input: 2.5, output: 10}}
    judge: {endpoint: openai, model: gpt-4o, samples: 3}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Each name from its module, imported on first use: reading a build config (``llm/config.py``) does not
# import the client and the openai library (3 s under load), so ``rmb build`` says what it will run at once.
_FROM = {
    "BudgetExceeded": "budget",
    "ResponseCache": "cache",
    "request_key": "cache",
    "LLMClient": "client",
    "cost_usd": "cost",
    "endpoint_description": "endpoint",
    "endpoint_identity": "endpoint",
    "public_url": "endpoint",
    "PlanningClient": "planning",
    "EmbeddedServer": "server",
    "ServerError": "server",
    "ReplyError": "structured",
    "parse_reply": "structured",
    "ChatRequest": "types",
    "ChatResult": "types",
    "Usage": "types",
}

if TYPE_CHECKING:
    from rmb_build.llm.budget import BudgetExceeded
    from rmb_build.llm.cache import ResponseCache, request_key
    from rmb_build.llm.client import LLMClient
    from rmb_build.llm.cost import cost_usd
    from rmb_build.llm.endpoint import endpoint_description, endpoint_identity, public_url
    from rmb_build.llm.planning import PlanningClient
    from rmb_build.llm.server import EmbeddedServer, ServerError
    from rmb_build.llm.structured import ReplyError, parse_reply
    from rmb_build.llm.types import ChatRequest, ChatResult, Usage


def __getattr__(name: str) -> object:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "LLMClient",
    "ChatRequest",
    "ChatResult",
    "Usage",
    "BudgetExceeded",
    "EmbeddedServer",
    "ServerError",
    "ResponseCache",
    "request_key",
    "endpoint_identity",
    "endpoint_description",
    "public_url",
    "PlanningClient",
    "cost_usd",
    "parse_reply",
    "ReplyError",
]
