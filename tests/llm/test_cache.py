"""The response cache (keys, two processes at once, stats, prune) and the cost estimate."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time

import pytest

from rmb_build.core.errors import ConfigError
from rmb_build.llm import ChatRequest, PlanningClient, ResponseCache, endpoint_identity, request_key
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.cost import cost_usd

BASE = ChatRequest("openai", "gpt-x", (("system", "Be brief."), ("user", "Is 2+2=4?")), max_tokens=16)
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def _key(req: ChatRequest, ident: str = "https://api.example/v1", mode: str | None = "json_schema") -> str:
    return request_key(req, ident, mode)


def test_key_changes_with_what_changes_the_answer():
    base = _key(BASE)
    changed = [
        dataclasses.replace(BASE, model="gpt-y"),
        dataclasses.replace(BASE, messages=BASE.messages[:1] + (("user", "Is 2+2=5?"),)),
        dataclasses.replace(BASE, messages=(("user", "Be brief."), ("user", "Is 2+2=4?"))),
        dataclasses.replace(BASE, temperature=0.7),
        dataclasses.replace(BASE, top_p=0.9),
        dataclasses.replace(BASE, max_tokens=17),
        dataclasses.replace(BASE, seed=1),
        dataclasses.replace(BASE, sample_index=1),
        dataclasses.replace(BASE, top_logprobs=2),
        dataclasses.replace(BASE, response_schema=SCHEMA),
        dataclasses.replace(BASE, stop=("\n\n",)),
    ]
    keys = {_key(r) for r in changed} | {_key(BASE, "http://other/v1"), base}
    assert len(keys) == len(changed) + 2
    # The structured-output mode only matters when a schema is sent.
    assert _key(BASE, mode="json_object") == base
    with_schema = dataclasses.replace(BASE, response_schema=SCHEMA)
    assert _key(with_schema, mode="json_object") != _key(with_schema)


def test_key_ignores_how_and_why_we_asked(monkeypatch):
    base = _key(BASE)
    for r in (
        dataclasses.replace(BASE, stage="judge"),
        dataclasses.replace(BASE, tag="pair 3"),
        dataclasses.replace(BASE, max_reasks=5),
        dataclasses.replace(BASE, endpoint="renamed"),
    ):
        assert _key(r) == base
    a = EndpointConfig(base_url="https://api.example/v1", api_key_env="KEY_A", timeout_s=5, max_retries=1)
    b = EndpointConfig(base_url="https://api.example/v1/", api_key_env="KEY_B", timeout_s=500, max_retries=9)
    monkeypatch.setenv("KEY_A", "sk-aaaaaaaaaaaa")
    monkeypatch.setenv("KEY_B", "sk-bbbbbbbbbbbb")
    assert _key(BASE, endpoint_identity(a)) == _key(BASE, endpoint_identity(b)) == base
    # An embedded server's port changes every run; its identity does not.
    assert endpoint_identity(EndpointConfig(embedded="smollm2", backend="llama_cpp")) == "embedded:smollm2"


def test_the_embedded_backend_is_part_of_the_key():
    """The torch backend's replies differ from llama.cpp's: a cache filled by one never answers the other."""
    llama = EndpointConfig(embedded="smollm2", backend="llama_cpp")
    torch = EndpointConfig(embedded="smollm2", backend="torch")
    assert endpoint_identity(torch) == "embedded:smollm2@torch"
    assert _key(BASE, endpoint_identity(llama)) != _key(BASE, endpoint_identity(torch))


def _writer(path: str, start: int, n: int) -> None:
    cache = ResponseCache(path)
    for i in range(start, start + n):
        cache.put(f"k{i}", {"text": f"answer {i}"}, endpoint="e", model="m", stage="judge")
    cache.close()


def test_two_processes_write_at_once(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s, 150)) for s in (0, 150)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ResponseCache(tmp_path)
    assert len(cache) == 300
    got = cache.get_many([f"k{i}" for i in range(0, 600, 2)])
    assert len(got) == 150 and got["k298"] == {"text": "answer 298"}
    assert cache.get("missing") is None


def test_stats_and_prune(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "llm_cache")
    clock = [1_700_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    cache.put(
        "old", {"text": "a"}, endpoint="embedded:smollm2", endpoint_name="local", model="smollm2", stage="generate"
    )
    clock[0] += 10 * 86400
    cache.put("judge", {"text": "b"}, endpoint="https://api/v1", endpoint_name="openai", model="gpt-x", stage="judge")
    cache.put("guard", {"text": "c"}, endpoint="https://api/v1", endpoint_name="openai", model="gpt-y", stage="guard")
    stats = cache.stats()
    assert stats["rows"] == 3 and stats["size_bytes"] > 0
    assert stats["by_endpoint"] == {"https://api/v1": 2, "embedded:smollm2": 1}
    assert stats["by_model"]["gpt-x"] == 1 and stats["by_stage"]["generate"] == 1
    assert stats["oldest"].startswith("2023-11-14") and stats["newest"].startswith("2023-11-24")
    assert cache.prune(older_than_days=5) == 1  # only the 10-day-old row
    assert cache.prune(endpoint="openai", model="gpt-y") == 1  # by config name and model together
    assert cache.prune(endpoint="embedded:smollm2") == 0
    assert [k for k in ("old", "judge", "guard") if cache.get(k)] == ["judge"]


def test_cost_and_estimate(tmp_path):
    eps = {
        "openai": EndpointConfig(base_url="https://api.example/v1", price_per_mtok={"input": 2.5, "output": 10}),
        "local": EndpointConfig(embedded="smollm2"),
    }
    assert cost_usd(eps["openai"], 1_000_000, 100_000) == pytest.approx(3.5)
    assert cost_usd(eps["local"], 10**6, 10**6) == 0.0
    reqs = [
        dataclasses.replace(BASE, messages=(("user", "x" * 400),), max_tokens=100, sample_index=i) for i in range(3)
    ]
    reqs.append(ChatRequest("local", "smollm2", (("user", "hi"),), max_tokens=8))
    est = PlanningClient(eps)
    est.plan(reqs + reqs[:1])  # asked twice, counted once: the cache would answer the second
    est = est.report()
    assert est["calls"] == 4 and est["completion_tokens"] == 308
    assert 100 * 3 < est["prompt_tokens"] < 130 * 3 + 20  # ~4 characters a token plus template overhead
    per_call = (est["by_endpoint"]["openai"]["prompt_tokens"] / 3 * 2.5 + 100 * 10) / 1e6
    assert est["cost_usd"] == pytest.approx(3 * per_call)
    # Requests already in the cache cost nothing.
    cache = ResponseCache(tmp_path)
    cache.put(
        request_key(reqs[0], endpoint_identity(eps["openai"]), "json_schema"),
        {"text": "yes"},
        endpoint="https://api.example/v1",
        model="gpt-x",
    )
    planner = PlanningClient(eps, cache)
    results = planner.plan(reqs)
    again = planner.report()
    assert again["calls"] == 3 and again["cached"] == 1 and again["cost_usd"] == pytest.approx(2 * per_call)
    assert results[0].cached and results[0].text == "yes" and not results[1].cached
    with pytest.raises(ConfigError, match="'nowhere'"):
        PlanningClient(eps).plan([dataclasses.replace(BASE, endpoint="nowhere")])


def test_a_stage_plans_on_the_endpoints_the_build_sees():
    """The view a stage asks in a dry run has the build's endpoints (a stage fits its inputs to the endpoint's
    context off its client): without them a long input would be planned cut to 3,000 tokens, not as sent."""
    from rmb_build.stages.common import DEFAULT_INPUT_TOKENS, endpoint_of, input_token_budget

    eps = {"openai": EndpointConfig(base_url="https://api.example/v1"), "local": EndpointConfig(embedded="smollm2")}
    view = PlanningClient(eps).for_phase("judge")
    assert all(endpoint_of(view, name) is ep for name, ep in eps.items())
    assert input_token_budget(endpoint_of(view, "openai"), 512) > DEFAULT_INPUT_TOKENS


def test_the_planner_watches_which_replies_a_block_read_were_stand_ins(tmp_path):
    """``watch()`` counts, within a block (and the tasks it starts), the requests asked and those a stand-in
    answered: the dry run builds a batch's sets for the style stage only where there were none."""
    import asyncio

    eps = {"openai": EndpointConfig(base_url="https://api.example/v1")}
    cache = ResponseCache(tmp_path)
    cached = dataclasses.replace(BASE, messages=(("user", "cached"),))
    key = request_key(cached, endpoint_identity(eps["openai"]), "json_schema")
    cache.put(key, {"text": "yes"}, endpoint="https://api.example/v1", model="gpt-x")
    planner = PlanningClient(eps, cache, answer_stages=("generate", "style"))

    async def chain(reqs):
        with planner.watch() as seen:
            await asyncio.gather(*(planner.for_phase("judge").chat_many([r]) for r in reqs))
        return seen

    async def both():
        return await asyncio.gather(chain([cached]), chain([cached, dataclasses.replace(BASE, stage="style")]))

    known, unknown = asyncio.run(both())
    assert (known.asked, known.stand_ins) == (1, 0) and (unknown.asked, unknown.stand_ins) == (2, 1)
    rewrite = planner.plan([dataclasses.replace(BASE, stage="style", response_schema=None)])[0]
    assert rewrite.text.startswith("[") and len(rewrite.text) > 20  # a rewrite stands in as a distinct answer
