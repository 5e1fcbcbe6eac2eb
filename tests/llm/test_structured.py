"""Structured output: the response_format each server understands and the tolerant reply parser."""

from __future__ import annotations

import pytest

from rmb_build.llm.structured import ReplyError, parse_reply, reask_message, response_format

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}, "reason": {"type": "string"}},
    "required": ["score"],
}


def test_response_format_per_mode():
    assert response_format("json_schema", SCHEMA, "judge") == {
        "type": "json_schema",
        "json_schema": {"name": "judge", "schema": SCHEMA, "strict": False},
    }
    # llama_cpp.server answers HTTP 500 to json_schema; it takes the schema inside json_object.
    assert response_format("json_object", SCHEMA) == {"type": "json_object", "schema": SCHEMA}
    assert response_format("none", SCHEMA) is None
    with pytest.raises(ValueError):
        response_format("xml", SCHEMA)


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 7}',
        '```json\n{"score": 7}\n```',
        'Sure! Here is my rating:\n{"score": 7}\nHope this helps.',
        '{"score": 7,}',
        '{"score": 7, "reason": "fine",\n}',
        '{"score": 7, "reason": "cut off by max_tokens"',
        '{"score": "oops"} I mean {"score": 7}',
    ],
)
def test_parse_reply_recovers_json(text):
    assert parse_reply(text, SCHEMA)["score"] == 7


def test_parse_reply_names_the_schema_violation():
    with pytest.raises(ReplyError, match="score.*11 is greater than the maximum of 10"):
        parse_reply('{"score": 11}', SCHEMA)
    with pytest.raises(ReplyError, match="'score' is a required property"):
        parse_reply('{"verdict": "good"}', SCHEMA)
    with pytest.raises(ReplyError, match="is empty"):
        parse_reply("  ", SCHEMA)
    with pytest.raises(ReplyError, match="not valid JSON|no JSON"):
        parse_reply("I would rate it seven.", SCHEMA)


def test_parse_reply_without_schema_and_reask_text():
    assert parse_reply("[1, 2]", None) == [1, 2]
    msg = reask_message("does not match the schema at score: 11 is greater than the maximum of 10", SCHEMA)
    assert "11 is greater" in msg and '"required": ["score"]' in msg


def test_schema_error_preferred_over_prose():
    with pytest.raises(ReplyError, match="^does not match the schema at score"):
        parse_reply('My rating: {"score": 0}', SCHEMA)
    # A value nested in a wrong answer is not taken for the answer.
    with pytest.raises(ReplyError):
        parse_reply('{"score": 11, "detail": {"score": 3}}', SCHEMA)
