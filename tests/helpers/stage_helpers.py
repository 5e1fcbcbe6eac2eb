"""Helpers for the LLM stage tests: tiny queries, and a scripted stand-in for the LLM client.

The scripted client is only for paths a real model cannot be made to take on demand (a transport
error, an empty or unreadable reply); every stage also has a slow test on the real embedded model.
"""

from __future__ import annotations

from typing import Callable

from rmb_build.core.items import Turn
from rmb_build.core.records import Query, query_id
from rmb_build.llm.types import ChatRequest, ChatResult, Usage


def make_query(
    n: int,
    text: str = "What is the capital of France?",
    scenario: str | None = "Helpfulness/Open QA/Factual",
    turns: tuple[Turn, ...] = (),
) -> Query:
    conversation = turns + (Turn("user", text, "English"),)
    return Query(query_id("test", str(n)), conversation, "test", str(n), scenario_id=scenario)


class ScriptedClient:
    """Answers every request with ``reply(request)`` (a text, or an Exception for a failed call)."""

    def __init__(self, reply: Callable[[ChatRequest], str | Exception]):
        self.reply = reply
        self.requests: list[ChatRequest] = []
        self.batches: list[str] = []

    async def chat_many(self, requests: list[ChatRequest], desc: str = "") -> list[ChatResult]:
        self.batches.append(desc)
        out = []
        for req in requests:
            self.requests.append(req)
            got = self.reply(req)
            if isinstance(got, Exception):
                out.append(ChatResult(req, error=str(got), attempts=1))
            else:
                out.append(
                    ChatResult(
                        req,
                        text=got,
                        finish_reason="stop",
                        usage=Usage(len(str(req.messages)) // 4, len(got) // 4),
                        attempts=1,
                    )
                )
        return out


def served_client(server, tmp_path):
    """The real LLMClient on the session's embedded SmolLM2 server (endpoint name ``local``)."""
    from rmb_build.llm import LLMClient
    from rmb_build.llm.config import EndpointConfig

    endpoint = EndpointConfig(base_url=server.base_url, structured_output="json_object", max_concurrency=1)
    return LLMClient({"local": endpoint}, tmp_path / "llm_cache", progress=False)
