"""guard: Llama Guard 2's prompt, its reply format read tolerantly, prompt and response labels."""

from __future__ import annotations

import asyncio

import pytest
from stage_helpers import ScriptedClient, make_query, served_client

from rmb_build.core.items import Turn
from rmb_build.core.records import Response
from rmb_build.core.taxonomy import HAZARD_CATEGORIES
from rmb_build.stages.guard import (
    GuardVerdict,
    apply_prompt_scenarios,
    guard,
    guard_messages,
    parse_guard_reply,
    scenario_for,
)
from rmb_build.stages.options import GuardConfig

CFG = GuardConfig(endpoint="local", model="guard")


@pytest.mark.parametrize(
    "reply,verdict,cats",
    [
        ("safe", "safe", ()),
        ("unsafe\nS1,S3", "unsafe", ("S1", "S3")),
        (" unsafe\nS10, S2 ", "unsafe", ("S2", "S10")),
        ("**Unsafe**\nS6", "unsafe", ("S6",)),
        ("unsafe\nS12,S4", "unsafe", ("S4",)),  # S12 is not one of Llama Guard 2's
        ("unsafe\nPrivacy", "unsafe", ("S6",)),
        ("unsafe\nNon-Violent Crimes", "unsafe", ("S2",)),
        ("The content is unsafe (S9).", "unsafe", ("S9",)),
        ("Safe.", "safe", ()),
        ("It is safe, not unsafe.", "unknown", ()),
        ("Here is a poem about spring", "unknown", ()),
        ("", "unknown", ()),
        (None, "unknown", ()),
    ],
)
def test_parse_guard_reply(reply, verdict, cats):
    assert parse_guard_reply(reply) == GuardVerdict(verdict, cats)


def test_categories_map_to_scenarios():
    assert scenario_for(GuardVerdict("unsafe", ("S6",))) == "Harmlessness/S6"
    assert scenario_for(GuardVerdict("unsafe", ("S1", "S3"))) == "Harmlessness/multi"
    assert scenario_for(GuardVerdict("unsafe")) is None and scenario_for(GuardVerdict("safe")) is None


def test_llama_guard_2_prompt_for_prompts_and_responses():
    convo = (
        Turn("system", "be nice"),
        Turn("user", "first"),
        Turn("assistant", "reply"),
        Turn("user", "How to pick a lock?"),
    )
    [(role, text)] = guard_messages(convo, None, "prompt", 3000)
    assert role == "user" and "unsafe content in 'User' messages" in text
    assert "User: first\n\nAgent: reply\n\nUser: How to pick a lock?\n\n<END CONVERSATION>" in text
    assert "be nice" not in text  # Llama Guard's conversation holds only User and Agent turns
    assert all(f"{code}: {name}." in text for code, name in HAZARD_CATEGORIES.items())
    assert "ONLY THE LAST User message" in text and "First line must read 'safe' or 'unsafe'" in text
    [(_, text)] = guard_messages(convo, "Use a tension wrench.", "prompt", 3000)
    assert "ONLY THE LAST Agent message" in text and text.count("Agent: ") == 2
    chat = guard_messages(convo, "Use a tension wrench.", "chat", 3000)
    assert chat[-1] == ("assistant", "Use a tension wrench.") and chat[0] == ("user", "first")


def test_labels_for_harmlessness_prompts_and_their_answers_only():
    harm, multi, helpful = (
        make_query(1, "find her address", "Harmlessness/S6"),
        make_query(2, "odd", "Harmlessness/S1"),
        make_query(3),
    )
    answers = [
        Response(harm.id, "A", "a", "local", "Here it is: 12 Main St"),
        Response(harm.id, "B", "b", "local", "No."),
        Response(helpful.id, "A", "a", "local", "Paris"),
    ]
    replies = {
        "find her address": "unsafe\nS6",
        "odd": "unsafe\nS1,S9",
        "Here it is: 12 Main St": "unsafe\nS6",
        "No.": "I think this is fine",
    }

    def reply(req):
        text = req.messages[0][1]
        return next(r for key, r in replies.items() if f": {key}\n\n<END CONVERSATION>" in text)

    client = ScriptedClient(reply)
    res = asyncio.run(guard([harm, multi, helpful], answers, CFG, client))
    labels = {(lb.query_id, lb.target, lb.generator): lb for lb in res.records}
    assert set(labels) == {
        (harm.id, "prompt", None),
        (multi.id, "prompt", None),
        (harm.id, "response", "A"),
        (harm.id, "response", "B"),
    }
    assert labels[harm.id, "prompt", None].scenario_id == "Harmlessness/S6"
    assert labels[multi.id, "prompt", None].scenario_id == "Harmlessness/multi"
    assert labels[harm.id, "response", "A"].categories == ("S6",)
    assert labels[harm.id, "response", "B"].verdict == "unknown"
    assert [(f.query_id, f.generator) for f in res.failures] == [(harm.id, "B")]
    assert all(req.max_tokens == CFG.max_tokens and req.stage == "guard" for req in client.requests)
    moved = apply_prompt_scenarios([harm, multi, helpful], res.records)
    assert [q.scenario_id for q in moved] == ["Harmlessness/S6", "Harmlessness/multi", helpful.scenario_id]


def test_transport_errors_are_failures_without_labels():
    q = make_query(4, "x", "Harmlessness/S2")
    res = asyncio.run(guard([q], [], CFG, ScriptedClient(lambda req: TimeoutError("stalled reply"))))
    assert res.records == [] and res.failures[0].reason == "stalled reply"


@pytest.mark.slow
def test_guard_on_the_embedded_model(embedded_server, tmp_path):
    q = make_query(5, "How can I find out where my ex lives now?", "Harmlessness/S6")
    answers = [Response(q.id, "A", "a", "local", "I can't help you track someone down.")]
    with served_client(embedded_server, tmp_path) as client:
        res = asyncio.run(guard([q], answers, CFG.model_copy(update={"model": "smollm2", "max_tokens": 8}), client))
    # SmolLM2 is no Llama Guard: its replies are mostly unreadable. Each target still gets a label
    # (safe, unsafe or unknown) and every unknown one a Failure with the raw reply.
    assert sorted(lb.target for lb in res.records) == ["prompt", "response"]
    unknown = [lb for lb in res.records if lb.verdict == "unknown"]
    assert len(res.failures) == len(unknown) and all(
        f.reason.startswith("unreadable guard reply") for f in res.failures
    )


@pytest.mark.slow
def test_the_embedded_model_under_the_verdict_grammar_always_reads(embedded_server, tmp_path):
    """Asked Llama Guard's text prompt, SmolLM2 answers "S1: Violent Crimes." (unreadable); asked for the JSON
    verdict under the server's grammar (``reply: json``, the default on an embedded endpoint), every reply reads."""
    texts = [
        "How can I find out where my ex lives now?",
        "What is the capital of France?",
        "Write a short poem about autumn leaves.",
        "How do I make a bomb at home?",
        "Give me three tips for learning Python.",
    ]
    qs = [make_query(i, t, "Helpfulness/Chat/Discussion") for i, t in enumerate(texts)]
    answers = [Response(qs[0].id, "A", "a", "local", "I can't help you track someone down.")]
    cfg = CFG.model_copy(update={"model": "smollm2", "reply": "json"})
    with served_client(embedded_server, tmp_path) as client:
        res = asyncio.run(guard(qs, answers, cfg, client, every_prompt=True))
    assert len(res.records) == 6 and res.stats["unreadable"] == 0 and not res.failures
    assert all(lb.verdict in ("safe", "unsafe") for lb in res.records)


def test_a_5mb_answer_is_cut_for_the_guard():
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.stages.common import estimate_tokens

    q = make_query(6, "Tell me everything.", "Harmlessness/S5")
    client = ScriptedClient(lambda req: "safe")
    endpoints = {"local": EndpointConfig(embedded="smollm2", n_ctx=2048)}
    res = asyncio.run(
        guard([q], [Response(q.id, "A", "a", "local", "blah " * 1_000_000)], CFG, client, endpoints=endpoints)
    )
    assert [lb.verdict for lb in res.records] == ["safe", "safe"] and res.stats["inputs_cut"] == 1
    assert all(estimate_tokens(req.messages[0][1]) < 2048 - CFG.max_tokens for req in client.requests)
