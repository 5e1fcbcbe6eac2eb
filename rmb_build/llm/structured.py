"""Structured output: send a JSON schema the way a server understands it, then parse tolerantly.

Small models and some servers wrap JSON in code fences, put prose before it, or leave trailing
commas; ``parse_reply`` recovers the first JSON value that validates against the schema, and
``reask_message`` tells the model what was wrong when nothing does.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import jsonschema

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


MIN_SCORE, MAX_SCORE = 1, 10
MAX_RATIONALE_CHARS = 200  # "short": one or two sentences


def score_reply_schema(max_rationale_chars: int = MAX_RATIONALE_CHARS) -> dict[str, Any]:
    """The one reply of every 1-10 judge (the build's judge, ``rmb evaluate``'s pointwise judge): a short
    rationale, then an integer score.

    ``enum`` and ``maxLength`` constrain llama.cpp's grammar, which ignores ``minimum``/``maximum``, so even a
    tiny model's reply stays short and in range.
    """
    return {
        "type": "object",
        "properties": {
            "rationale": {"type": "string", "maxLength": max_rationale_chars},
            "score": {"type": "integer", "enum": list(range(MIN_SCORE, MAX_SCORE + 1))},
        },
        "required": ["rationale", "score"],
        "additionalProperties": False,
    }


class ReplyError(ValueError):
    """A reply that holds no JSON value valid against the schema."""


def response_format(mode: str, schema: dict[str, Any], name: str = "reply") -> dict[str, Any] | None:
    """The ``response_format`` argument for an endpoint's ``structured_output`` mode (None: send none)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
    if mode == "json_object":
        # llama_cpp.server turns this schema into a grammar; OpenAI ignores unknown keys here.
        return {"type": "json_object", "schema": schema}
    if mode == "none":
        return None
    raise ValueError(f"unknown structured_output mode {mode!r}")


def _candidates(text: str):
    """Substrings of ``text`` that may hold the JSON value, most likely first."""
    stripped = text.strip()
    yield stripped
    for block in _FENCE.findall(text):
        yield block.strip()
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                _, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                yield text[i:]  # trailing commas or a cut-off end: _loads repairs those
            else:
                yield text[i:end]
                i = end  # never a value nested inside one already offered
                continue
        i += 1


def _loads(candidate: str) -> object:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        cleaned = _TRAILING_COMMA.sub(r"\1", candidate)
        if cleaned != candidate:
            return json.loads(cleaned)
        if candidate.count("{") > candidate.count("}"):  # cut off by max_tokens right before the end
            return json.loads(
                _TRAILING_COMMA.sub(
                    r"\1", candidate.rstrip().rstrip(",") + "}" * (candidate.count("{") - candidate.count("}"))
                )
            )
        raise


def json_values(text: str) -> Iterator[object]:
    """Every JSON value ``text`` may hold, most likely first (a whole reply, a fenced block, then each
    ``{``/``[`` in order), repaired where it can be; a ``JSONDecodeError`` for a candidate that is not JSON."""
    for candidate in _candidates(text):
        try:
            yield _loads(candidate)
        except (json.JSONDecodeError, ValueError) as exc:
            yield exc


def first_json_object(text: str) -> dict | None:
    """The first JSON object in ``text`` (the lenient parser's reading), or None."""
    return next((v for v in json_values(text) if isinstance(v, dict)), None)


def parse_reply(text: str | None, schema: dict[str, Any] | None) -> object:
    """The first JSON value in ``text`` that validates against ``schema``; raises ReplyError otherwise."""
    if text is None or not text.strip():
        raise ReplyError("is empty")
    json_error: str | None = None
    schema_error: str | None = None  # preferred: a JSON answer that is wrong is what to correct
    for value in json_values(text):
        if isinstance(value, ValueError):  # JSONDecodeError included
            json_error = json_error or f"is not valid JSON ({value.msg if hasattr(value, 'msg') else value})"
            continue
        if schema is None:
            return value
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
        if not errors:
            return value
        err = errors[0]
        where = "/".join(str(p) for p in err.path) or "(top level)"
        schema_error = schema_error or f"does not match the schema at {where}: {err.message}"
    raise ReplyError(schema_error or json_error or "holds no JSON value")


def reask_message(error: str, schema: dict[str, Any]) -> str:
    """The follow-up user message after a reply that did not parse."""
    return (
        f"Your reply {error}. Reply again with only one JSON object that follows this JSON schema, "
        f"and nothing else:\n{json.dumps(schema, ensure_ascii=False)}"
    )
