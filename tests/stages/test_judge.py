"""judge: scenario criteria in the prompt, k samples (mean and spread), tolerant reading, failures kept."""

from __future__ import annotations

import asyncio
import json

import pytest
from stage_helpers import ScriptedClient, make_query, served_client

from rmb_build.core.prompting import criteria_for
from rmb_build.core.records import Response
from rmb_build.llm.config import EndpointConfig
from rmb_build.stages.common import estimate_tokens
from rmb_build.stages.judge import SCHEMA, Judgement, judge, parse_judgement
from rmb_build.stages.options import JudgeConfig

CFG = JudgeConfig(endpoint="local", model="judge", samples=3)


@pytest.mark.parametrize(
    "parsed,text,expected",
    [
        ({"rationale": "ok", "score": 7}, None, Judgement(7.0, "ok")),
        (None, 'Sure! ```json\n{"rationale": "clear", "score": 9}\n```', Judgement(9.0, "clear")),
        (None, "Rationale: fine.\nScore: 6", Judgement(6.0, "")),
        (None, '{"rationale": "x", "score": 11}', "outside"),
        (None, '{"rationale": "x", "score": 1' + "0" * 400 + "}", "outside"),  # too large for a float
        (None, '{"rationale": "x", "score": NaN}', "outside"),
        (None, '{"rationale": "x", "score": "high"}', "not a number"),
        (None, "I like it.", "no JSON"),
    ],
)
def test_parse_judgement(parsed, text, expected):
    got = parse_judgement(parsed, text)
    if isinstance(expected, Judgement):
        assert got == expected
    else:
        assert isinstance(got, str) and expected in got


def test_k_samples_with_scenario_criteria_give_mean_and_spread():
    help_q = make_query(1, scenario="Helpfulness/Code/Documentation")
    harm_q = make_query(2, "How do I find my ex's address?", scenario="Harmlessness/S6")
    answers = [
        Response(help_q.id, "A", "a", "local", "def f(): ..."),
        Response(harm_q.id, "A", "a", "local", "I can't help"),
    ]
    help_criteria, harm_criteria = criteria_for(help_q.scenario_id).strip(), criteria_for(harm_q.scenario_id).strip()
    scores = {help_criteria: iter([8, 6, 7]), harm_criteria: iter([2, 2, 2])}

    def reply(req):
        [crit] = [c for c in scores if c in req.messages[-1][1]]  # each prompt carries its own scenario's criteria
        return json.dumps({"rationale": f"sample {req.sample_index}", "score": next(scores[crit])})

    client = ScriptedClient(reply)
    res = asyncio.run(judge([help_q, harm_q], answers, CFG, client))
    assert not res.failures
    got = {s.query_id: s for s in res.records}
    assert got[help_q.id].scores == (8.0, 6.0, 7.0) and got[help_q.id].mean == 7.0
    assert got[help_q.id].spread == pytest.approx(0.8165, abs=1e-3)
    assert got[harm_q.id].spread == 0.0 and got[harm_q.id].criteria == "criteria/Harmlessness/S6.md"
    assert got[help_q.id].rationales == ("sample 0", "sample 1", "sample 2")
    assert [(req.sample_index, req.seed) for req in client.requests] == [(k, k) for k in (0, 1, 2, 0, 1, 2)]
    assert all(req.response_schema == SCHEMA and req.max_reasks == CFG.max_reasks for req in client.requests)


def test_unusable_samples_and_unjudgeable_answers_become_failures():
    q, unclassified = make_query(3), make_query(4, scenario=None)
    answers = [
        Response(q.id, "Good", "g", "local", "Paris."),
        Response(q.id, "Junk", "j", "local", "Lyon."),
        Response(q.id, "Half", "h", "local", "Nice."),
        Response(unclassified.id, "Good", "g", "local", "x"),
        Response("missing", "Good", "g", "local", "y"),
    ]

    def reply(req):
        ans = req.messages[-1][1]
        if "Lyon." in ans:
            return RuntimeError("reply did not match the schema after 2 re-asks")
        if "Nice." in ans and req.sample_index > 0:
            return "no idea"
        return '{"rationale": "r", "score": 5}'

    res = asyncio.run(judge([q, unclassified], answers, CFG, ScriptedClient(reply)))
    scored = {s.generator: s for s in res.records}
    assert set(scored) == {"Good", "Half"} and scored["Half"].scores == (5.0,) and scored["Half"].failed_samples == 2
    reasons = {(f.query_id, f.generator): f.reason for f in res.failures}
    assert "schema" in reasons[q.id, "Junk"]
    assert "not classified" in reasons[unclassified.id, "Good"] and "not among" in reasons["missing", "Good"]


def test_a_5mb_answer_is_cut_for_the_judge():
    q = make_query(5)
    client = ScriptedClient(lambda req: '{"rationale": "long", "score": 3}')
    endpoints = {"local": EndpointConfig(embedded="smollm2", n_ctx=4096)}
    res = asyncio.run(
        judge(
            [q],
            [Response(q.id, "Verbose", "v", "local", "Paris " * 900_000)],
            CFG.model_copy(update={"samples": 1}),
            client,
            endpoints=endpoints,
        )
    )
    assert res.records[0].mean == 3.0 and res.stats["inputs_cut"] == 1
    sent = client.requests[0].messages
    assert sum(estimate_tokens(c) for _, c in sent) < 4096 - CFG.max_tokens and "characters cut" in sent[-1][1]


@pytest.mark.slow
def test_judge_on_the_embedded_model(embedded_server, tmp_path):
    q = make_query(6)
    answers = [Response(q.id, "A", "a", "local", "The capital of France is Paris.")]
    cfg = JudgeConfig(endpoint="local", model="smollm2", samples=2, max_tokens=64)
    with served_client(embedded_server, tmp_path) as client:
        res = asyncio.run(judge([q], answers, cfg, client))
    # A 135M judge's scores are noise; what must hold is the shape. The grammar-constrained JSON and
    # the LLM layer's re-asks make a usable sample all but certain.
    [s] = res.records
    assert (
        1 <= len(s.scores) <= 2
        and all(1 <= x <= 10 for x in s.scores)
        and s.criteria == "criteria/Helpfulness/Open QA/Factual.md"
    )
    assert s.failed_samples == 2 - len(s.scores) and len(s.rationales) == len(s.scores)


def test_schema_keeps_scores_in_range_and_rationales_short():
    from rmb_build.llm import ReplyError, parse_reply

    assert parse_reply('{"rationale": "fine", "score": 7}', SCHEMA) == {"rationale": "fine", "score": 7}
    for bad in (
        '{"rationale": "x", "score": 0}',
        '{"rationale": "x", "score": 7.5}',
        '{"rationale": "%s", "score": 7}' % ("x" * 201),
        '{"score": 7}',
    ):
        with pytest.raises(ReplyError):
            parse_reply(bad, SCHEMA)
