"""generate: several models per query with their own system prompt and sampling; failures recorded."""

from __future__ import annotations

import asyncio

import pytest
from stage_helpers import ScriptedClient, make_query, served_client

from rmb_build.core.errors import ConfigError
from rmb_build.core.items import Turn
from rmb_build.core.records import Query
from rmb_build.llm.config import EndpointConfig
from rmb_build.stages.common import estimate_tokens
from rmb_build.stages.generate import generate
from rmb_build.stages.options import GeneratorConfig

GENS = [
    GeneratorConfig(endpoint="local", model="m1", name="Polite", system_prompt="Be polite.", temperature=0.2, seed=1),
    GeneratorConfig(endpoint="local", model="m2", temperature=1.0, top_p=0.9, max_tokens=64),
]


def test_one_answer_per_query_and_model_with_each_models_settings():
    client = ScriptedClient(lambda req: f"answer from {req.model}")
    res = asyncio.run(generate([make_query(1), make_query(2)], GENS, client))
    assert not res.failures
    assert sorted((r.query_id, r.generator) for r in res.records) == sorted(
        (make_query(n).id, g) for n in (1, 2) for g in ("Polite", "m2")
    )
    by_model = {req.model: req for req in client.requests}
    assert by_model["m1"].messages[0] == ("system", "Be polite.") and by_model["m1"].seed == 1
    assert by_model["m1"].temperature == 0.2
    assert by_model["m2"].messages[0][0] == "user" and by_model["m2"].top_p == 0.9 and by_model["m2"].max_tokens == 64
    assert all(req.stage == "generate" and req.tag for req in client.requests)
    assert {r.text for r in res.records} == {"answer from m1", "answer from m2"}


def test_a_5mb_turn_is_cut_to_fit_the_model_and_counted():
    huge = "word " * 1_000_000
    q = make_query(3, "Summarise the text above.", turns=(Turn("user", "Here is a text."), Turn("assistant", huge)))
    client = ScriptedClient(lambda req: "a summary")
    endpoints = {"local": EndpointConfig(embedded="smollm2", n_ctx=4096)}
    res = asyncio.run(generate([q], GENS[:1], client, endpoints=endpoints))
    [r] = res.records
    sent = client.requests[0].messages
    assert r.input_chars_cut > 4_000_000 and res.stats["inputs_cut"] == 1
    assert sum(estimate_tokens(c) for _, c in sent) < 4096 - GENS[0].max_tokens
    assert sent[-1] == ("user", "Summarise the text above.")  # short turns stay whole


def test_failures_are_recorded_never_raised():
    def reply(req):
        if "boom" in req.messages[-1][1]:
            return RuntimeError("HTTP 500 after 8 retries")
        return "   " if "empty" in req.messages[-1][1] else "fine"

    ends_with_assistant = Query("q9", (Turn("user", "hi"), Turn("assistant", "hello")), "test", "9")
    queries = [
        make_query(4, "boom"),
        make_query(5, "empty"),
        make_query(6, "ok"),
        make_query(6, "ok"),
        ends_with_assistant,
    ]
    client = ScriptedClient(reply)
    res = asyncio.run(generate(queries, GENS[:1], client))
    reasons = {f.query_id: f.reason for f in res.failures}
    assert "HTTP 500" in reasons[make_query(4).id] and "empty answer" in reasons[make_query(5).id]
    assert "not a user turn" in reasons[ends_with_assistant.id]
    assert [r.query_id for r in res.records] == [make_query(6).id]
    assert res.stats["duplicate_queries"] == 1 and len(client.requests) == 3


def test_two_generators_with_one_name_fail_before_any_call():
    client = ScriptedClient(lambda req: "x")
    gens = [
        GeneratorConfig(endpoint="local", model="a", name="Same"),
        GeneratorConfig(endpoint="local", model="b", name="Same"),
    ]
    with pytest.raises(ConfigError, match=r"generators\[1\]\.name"):
        asyncio.run(generate([make_query(1)], gens, client))
    assert client.requests == []


@pytest.mark.slow
def test_generate_on_the_embedded_model(embedded_server, tmp_path):
    gens = [
        GeneratorConfig(endpoint="local", model="smollm2", name="Smol-A", max_tokens=12),
        GeneratorConfig(
            endpoint="local",
            model="smollm2",
            name="Smol-B",
            system_prompt="Answer in one sentence.",
            temperature=1.0,
            seed=3,
            max_tokens=12,
        ),
    ]
    with served_client(embedded_server, tmp_path) as client:
        res = asyncio.run(generate([make_query(1)], gens, client))
        assert not res.failures and [r.generator for r in res.records] == ["Smol-A", "Smol-B"]
        assert all(r.text and r.completion_tokens <= 12 and r.model == "smollm2" for r in res.records)
        again = asyncio.run(generate([make_query(1)], gens, client))  # answered from the LLM cache
        assert [r.text for r in again.records] == [r.text for r in res.records]
        assert client.usage()["generate"]["smollm2"]["cached"] == 2


def test_generator_system_prompt_merges_with_the_conversations_own():
    q = make_query(7, "Hi", turns=(Turn("system", "You are a pirate."),))
    client = ScriptedClient(lambda req: "Arr")
    asyncio.run(generate([q], GENS[:1], client))
    assert client.requests[0].messages == (("system", "Be polite.\n\nYou are a pirate."), ("user", "Hi"))
