"""The OpenAI chat-completions wire format: the body sent for a request, and what is kept of a reply."""

from __future__ import annotations

from typing import Any, Sequence

from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.structured import response_format
from rmb_build.llm.types import ChatRequest


def request_body(req: ChatRequest, ep: EndpointConfig, messages: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The JSON body of ``/chat/completions`` for ``req`` with ``messages`` (a re-ask has more)."""
    body: dict[str, Any] = {
        "model": req.model,
        "messages": [{"role": r, "content": c} for r, c in messages],
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
    }
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.seed is not None:
        body["seed"] = req.seed + req.sample_index  # repeated samples must differ under a fixed seed
    if req.response_schema is not None:
        fmt = response_format(ep.structured_output or "json_schema", req.response_schema, req.schema_name)
        if fmt is not None:
            body["response_format"] = fmt
    if req.stop:
        body["stop"] = list(req.stop)
    if req.top_logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = req.top_logprobs
    return body


def reply_tokens(reply: dict[str, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens the server says a reply took (0 where it does not say)."""
    usage = reply.get("usage") or {}
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


def _logprobs(choice: dict[str, Any]) -> list[dict[str, Any]] | None:
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    return [
        {
            "token": t["token"],
            "logprob": t["logprob"],
            "top": [{"token": a["token"], "logprob": a["logprob"]} for a in (t.get("top_logprobs") or [])],
        }
        for t in content
    ]


def parse_completion(reply: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of a reply: text, finish reason, usage, logprobs, model.

    Raises ValueError (or KeyError/IndexError/TypeError) for a reply without message content.
    """
    choice = reply["choices"][0]
    text = (choice.get("message") or {}).get("content")
    if not isinstance(text, str):
        raise ValueError("the reply has no message content")
    p, c = reply_tokens(reply)
    return {
        "text": text,
        "finish_reason": choice.get("finish_reason"),
        "usage": {"prompt_tokens": p, "completion_tokens": c},
        "logprobs": _logprobs(choice),
        "model": reply.get("model"),
    }
