"""The helpers the LLM stages share: fitting long texts into a context."""

from __future__ import annotations

from rmb_build.llm.config import EndpointConfig
from rmb_build.stages.common import endpoints_of, estimate_tokens, fit_texts, input_token_budget


def test_fit_texts_cuts_only_the_long_text_and_fits_the_budget():
    short, huge = "a short question", "x" * 5_000_000  # a 5 MB answer is valid input
    texts, cut = fit_texts([short, huge, short], 3000)
    assert texts[0] == texts[2] == short
    assert sum(estimate_tokens(t) for t in texts) <= 3000 + 50  # + the cut marker
    assert "characters cut" in texts[1] and texts[1].startswith("xxx") and cut > 4_900_000


def test_fit_texts_shares_the_budget_between_several_long_texts():
    texts, _ = fit_texts(["a" * 30_000, "b" * 9_000, "c" * 300], 6000)
    assert texts[2] == "c" * 300
    assert abs(len(texts[0]) - len(texts[1])) < 100  # both cut to the same cap


def test_fit_texts_counts_multibyte_text_as_more_tokens():
    cjk = "漢" * 10_000  # ~1 token per character
    texts, cut = fit_texts([cjk], 2000)
    assert cut > 7000 and estimate_tokens(texts[0]) <= 2000 + 50


def test_budget_follows_the_endpoint():
    embedded = EndpointConfig(embedded="smollm2", n_ctx=2048)
    remote = EndpointConfig(base_url="https://api.example.com/v1")
    assert input_token_budget(embedded, 512) < 2048 - 512
    assert input_token_budget(remote, 512) > input_token_budget(embedded, 512)
    assert input_token_budget(None, 512, overhead_tokens=100) < input_token_budget(None, 512)


def test_a_stage_plans_with_the_endpoints_given_else_the_clients():
    given = {"a": EndpointConfig(embedded="smollm2", n_ctx=2048)}
    client = type("Client", (), {"endpoints": {"b": EndpointConfig(embedded="smollm2", n_ctx=4096)}})()
    assert endpoints_of(client, given) is given
    assert endpoints_of(client) is client.endpoints
    assert endpoints_of(object()) is None


def test_judge_and_guard_take_only_finished_answers_by_one_rule():
    from rmb_build.core.records import Response
    from rmb_build.stages import guard, judge
    from rmb_build.stages.common import finished_only

    done = Response("q1", "a", "m", "local", "A whole answer.", "stop")
    cut = Response("q1", "b", "m", "local", "An answer cut", "length")
    assert judge.SPEC.takes is guard.SPEC.takes is finished_only
    assert finished_only(None, [done, cut]) == [done]
