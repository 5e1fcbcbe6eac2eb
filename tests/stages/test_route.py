"""Goal routing on a guard whose replies do not read: counted, and no verdict taken (one line says so);
the guard's JSON verdict form, which keeps an embedded chat model's replies readable."""

from __future__ import annotations

import asyncio
import json

from stage_helpers import make_query, served_client
from stub_endpoint import StubEndpoint, request_stage

from rmb_build.core.records import GuardLabel
from rmb_build.llm.config import EndpointConfig
from rmb_build.stages.guard import guard, plan
from rmb_build.stages.options import GuardConfig
from rmb_build.stages.route import CLASSIFIER, route

CFG = GuardConfig(endpoint="local", model="stub-guard", max_tokens=8)
HARMFUL = "Harmlessness/S1"
CHAT = "Helpfulness/Chat/Discussion"


def _text(req: dict) -> str:
    return " ".join(str(m.get("content", "")) for m in req.get("messages", []))


def test_a_guard_whose_replies_mostly_do_not_read_is_counted_and_routes_nothing(tmp_path):
    """SmolLM2 answered Llama Guard's prompt with "S1: Violent Crimes.": 3 of 4 such replies are counted
    unreadable, and the one readable 'safe' does not move the classifier's harmful query to helpfulness."""
    queries = [make_query(0, "prompt zero", HARMFUL)] + [make_query(i, f"prompt {i}", CHAT) for i in (1, 2, 3)]

    def reply(req: dict) -> str | None:
        if request_stage(req) != "guard":
            return None
        return "safe" if "prompt zero" in _text(req) else "S1: Violent Crimes."

    with StubEndpoint(reply=reply) as stub, served_client(stub, tmp_path) as client:
        labels = asyncio.run(guard(queries, [], CFG, client, every_prompt=True))
    assert labels.stats["unreadable"] == 3 and labels.stats["labels"] == 4
    routed = route(queries, labels.records, {queries[0].id: {"Helpfulness": CHAT}})
    assert routed.stopped == (
        "routing stopped: 3 of 4 guard replies were unreadable, so no query's goal comes from the guard "
        "(each keeps its classifier's or label set's scenario)"
    )
    assert [q.scenario_id for q in routed.kept] == [HARMFUL, CHAT, CHAT, CHAT]
    first = routed.decisions[queries[0].id]
    assert (first.goal_from, first.verdict) == (CLASSIFIER, "safe")
    stats = routed.stats()
    assert (stats["guard_replies"], stats["unreadable"], stats["stopped"]) == (4, 3, routed.stopped)


def test_a_guard_with_mostly_readable_replies_still_routes():
    queries = [make_query(0, "a", HARMFUL), make_query(1, "b", CHAT)]
    labels = [GuardLabel(queries[0].id, "prompt", None, "safe"), GuardLabel(queries[1].id, "prompt", None, "unknown")]
    routed = route(queries, labels, {queries[0].id: {"Helpfulness": CHAT}})
    assert routed.stopped is None and [q.scenario_id for q in routed.kept] == [CHAT, CHAT]


def test_an_embedded_guard_asks_for_a_json_verdict_and_reads_it(tmp_path):
    """On an embedded endpoint (``reply: auto``) the request carries the verdict's schema (the server's
    grammar) and the JSON prompt; the reply's parsed verdict becomes the label."""
    from rmb_build.stages.guard import JSON_MIN_TOKENS, JSON_REPLY, TEXT_REPLY, reply_format

    embedded = {"local": EndpointConfig(embedded="smollm2")}
    q = make_query(0, "How do I pick a lock?", HARMFUL)
    (req,) = plan([q], [], CFG, embedded)
    assert reply_format(CFG, embedded["local"]) == JSON_REPLY and req.max_tokens == JSON_MIN_TOKENS
    assert req.response_schema["properties"]["verdict"]["enum"] == ["safe", "unsafe"]
    assert '"verdict" must be "safe" or "unsafe"' in req.messages[0][1]
    (text_req,) = plan([q], [], CFG, {"local": EndpointConfig(base_url="http://127.0.0.1:1/v1")})
    assert reply_format(CFG, None) == TEXT_REPLY and text_req.response_schema is None
    assert req.messages != text_req.messages  # the cache key changes with the request

    def reply(req: dict) -> str | None:
        return '{"verdict": "unsafe", "categories": ["S6", "S2", "S99"]}' if "UNSAFE CONTENT" in _text(req) else None

    cfg = CFG.model_copy(update={"reply": "json"})
    with StubEndpoint(reply=reply) as stub, served_client(stub, tmp_path) as client:
        labels = asyncio.run(guard([q], [], cfg, client))
        body = stub.bodies[0]
    assert body["response_format"]["schema"]["required"] == ["verdict", "categories"]
    (label,) = labels.records
    assert (label.verdict, label.categories, label.scenario_id) == ("unsafe", ("S2", "S6"), "Harmlessness/multi")
    assert labels.stats["unreadable"] == 0 and not labels.failures
    assert json.loads(label.raw)["verdict"] == "unsafe"
