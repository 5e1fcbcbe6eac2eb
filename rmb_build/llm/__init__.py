"""The LLM layer: one cached, concurrent, fault-tolerant client for every LLM call, and an embedded local model.

    from rmb_build.llm import LLMClient, ChatRequest
    with LLMClient(cfg.endpoints, run_dir / "llm_cache") as client:
        results = client.run([ChatRequest("local", "smollm2", (("user", "Hi"),), max_tokens=16)])
"""

from .cache import ResponseCache, endpoint_identity, request_key
from .client import BudgetExceeded, LLMClient
from .cost import cost_usd, estimate
from .server import EmbeddedServer, ServerError
from .structured import ReplyError, parse_reply
from .types import ChatRequest, ChatResult, Usage

__all__ = [
    "LLMClient", "ChatRequest", "ChatResult", "Usage", "BudgetExceeded", "EmbeddedServer", "ServerError",
    "ResponseCache", "request_key", "endpoint_identity", "estimate", "cost_usd", "parse_reply", "ReplyError",
]
