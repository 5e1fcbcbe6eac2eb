"""A dry run estimates the very requests a build sends: on a stub endpoint that counts what arrives,
the dry run sends nothing (LLM classification included), and its request count and token estimate
equal what the real run then sends; a dry run after the build finds every planned request cached."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from stub_endpoint import StubEndpoint

from rmb_build.llm import ChatRequest
from rmb_build.llm.cost import estimate_prompt_tokens
from rmb_build.pipeline.config import parse_config

PROMPTS = [
    "Write a haiku about autumn rain.",
    "Write a Python function that reverses a linked list.",
    "How can I read my coworker's private messages without her knowing?",
    "Summarize the plot of Hamlet in two sentences.",
]


def _config(tmp_path: Path, url: str) -> dict:
    src = tmp_path / "queries.jsonl"
    if not src.exists():
        src.write_text("".join(json.dumps({"id": f"q{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS)))
    return {
        "name": "plan",
        "endpoints": {"stub": {"base_url": url, "max_concurrency": 4, "price_per_mtok": {"input": 1.0, "output": 2.0}}},
        "sources": [{"kind": "jsonl", "path": str(src), "license": "CC0-1.0"}],
        "classifier": {"method": "llm", "endpoint": "stub", "model": "classifier"},
        "generators": [
            {"endpoint": "stub", "model": "gen", "name": "a", "max_tokens": 12},
            {
                "endpoint": "stub",
                "model": "gen",
                "name": "b",
                "max_tokens": 30,
                "temperature": 0.9,
                "system_prompt": "Be brief.",
            },
        ],
        "judge": {"endpoint": "stub", "model": "judge", "samples": 2},
        "min_generators": 1,  # one stub model behind both generators
        "guard": {"endpoint": "stub", "model": "guard"},
        "stages": ["gather", "classify", "generate", "judge", "guard", "build_sets"],
    }


def _verdict(scenario: str) -> str:
    """The guard verdict on a prompt that keeps the classifier's label through goal routing."""
    if not scenario.startswith("Harmlessness/"):
        return "safe"
    category = scenario.rsplit("/", 1)[1]
    return "unsafe\nS1,S2" if category == "multi" else f"unsafe\n{category}"


def _replies(scenarios: dict[str, str]):
    """The stub's answers: the embedding classifier's scenario (what a dry run assumes), answers as
    long as the dry run assumes, a valid judgement, guard verdicts on prompts that route every query
    to the scenario it was classified in (as the dry run assumes), and 'safe' on answers."""
    from rmb_build.stages.generate import assumed_answer

    def reply(body: dict) -> str:
        text = body["messages"][-1]["content"]
        if body["model"] == "classifier":
            [sid] = [s for p, s in scenarios.items() if p in text]
            return json.dumps({"scenario": sid, "confidence": 0.9})
        if body["model"] == "gen":
            return assumed_answer(body["max_tokens"])
        if body["model"] == "judge":
            return json.dumps({"rationale": "Fine.", "score": 7})
        if "LAST User message" in text:
            [sid] = [s for p, s in scenarios.items() if p in text]
            return _verdict(sid)
        return "safe"

    return reply


def _sent(stub: StubEndpoint) -> dict:
    """What arrived at the stub, counted as the estimate counts requests."""
    reqs = [
        ChatRequest(
            "stub", b["model"], tuple((m["role"], m["content"]) for m in b["messages"]), max_tokens=b["max_tokens"]
        )
        for b in stub.bodies
    ]
    return {
        "calls": len(reqs),
        "prompt_tokens": sum(estimate_prompt_tokens(r) for r in reqs),
        "completion_tokens": sum(r.max_tokens for r in reqs),
    }


def _gold(path: Path) -> str:
    """A tiny labelled release for the build's gold check: two helpfulness and two harmlessness pairs."""
    from rmb_build.core.items import Answer, PairwiseItem, Turn
    from rmb_build.pipeline.release_step import release_of
    from rmb_build.release.write import write_release

    scenarios = ["Helpfulness/Chat/Discussion", "Harmlessness/S6"] * 2
    items = [
        PairwiseItem(
            str(n),
            (Turn("user", f"gold question {n}", "English"),),
            Answer("m1", f"good answer {n}"),
            Answer("m2", f"bad answer {n}"),
            sc,
        )
        for n, sc in enumerate(scenarios)
    ]
    write_release(release_of("gold", items), path)
    return str(path)


def _realistic(scenarios: dict[str, str]):
    """Replies as a real build gets them: each generator's own answer (short, finished: not the dry run's
    stand-in), a judgement per sample, guard verdicts that keep each query's classified goal."""
    base = _replies(scenarios)

    def reply(body: dict) -> str:
        if body["model"] == "gen":
            seen = json.dumps([body["messages"], body.get("temperature"), body.get("seed")])
            return f"An answer ({hashlib.sha256(seen.encode()).hexdigest()[:8]}) to the question, in a few words."
        if "gold question" in json.dumps(body) and body["model"] == "guard":
            return "safe"
        return base(body)

    return reply


def _config_with_checks(tmp_path: Path, url: str) -> dict:
    """Three generators of one model and one max_tokens (their stand-in answers once merged into one judge
    request per query), three judge samples, goal routing (on by default) and a gold check."""
    cfg = _config(tmp_path, url)
    cfg["generators"] = [
        {"endpoint": "stub", "model": "gen", "name": n, "max_tokens": 24, "temperature": t, "seed": s}
        for n, t, s in (("a", 0.7, 1), ("b", 0.7, 2), ("c", 1.0, 1))
    ]
    cfg["judge"].update(samples=3, gold={"release": _gold(tmp_path / "gold"), "items": 4})
    return cfg


def _per_model(stub: StubEndpoint) -> dict[str, int]:
    return dict(Counter(f"stub/{b['model']}" for b in stub.bodies))


def _stage_of(body: dict) -> str:
    """The build stage that sent a request the stub received: the gold check's read gold questions,
    goal routing's guard reads a prompt (the LAST User message), the build's guard an answer."""
    text = json.dumps(body["messages"])
    if "gold question" in text:
        return "gold"
    if body["model"] == "guard":
        return "route" if "LAST User message" in text else "guard"
    return {"classifier": "classify", "gen": "generate", "judge": "judge"}[body["model"]]


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_dry_run_counts_what_the_build_sends_per_stage(tmp_path):
    from rmb_build.pipeline.run import run_local
    from rmb_build.stages.classify import EmbeddingClassifier

    predicted = EmbeddingClassifier.default().predict_texts(PROMPTS)
    scenarios = {p: pred.scenario_id for p, pred in zip(PROMPTS, predicted)}
    work = tmp_path / "work"
    with StubEndpoint(reply=_realistic(scenarios)) as stub:
        raw = _config_with_checks(tmp_path, stub.base_url)
        raw["run"] = {"batch_size": 1}  # the build's chains side by side, each stage's requests its own
        cfg = parse_config(raw)
        dry = run_local(cfg, work, dry_run=True)["estimate"]
        assert stub.bodies == [] and dry["cached"] == 0
        run_local(cfg, work)
        received = _per_model(stub)
        assert {m: row["calls"] for m, row in dry["by_model"].items()} == received
        # per stage: the plan walked the build's own steps, in its order, each request under its stage
        assert {p: row["calls"] for p, row in dry["by_phase"].items()} == Counter(map(_stage_of, stub.bodies))
        assert dry["calls"] == len(stub.bodies)
        harmful = sum(s.startswith("Harmlessness/") for s in scenarios.values())
        assert (
            received["stub/judge"] == 4 * 2 * 3 + len(PROMPTS) * 3 * 3
        )  # gold: 4 pairs x 2 answers x 3 samples; build: 4 x 3 x 3
        # gold: every prompt (its precision) and both answers of the 2 harmlessness pairs; routing; answers
        assert received["stub/guard"] == 4 + 2 * 2 + len(PROMPTS) + harmful * 3
        assert set(dry["by_phase"]) == {"classify", "gold", "route", "generate", "judge", "guard"}
        assert dry["estimates"] == {} and dry["exact"]["calls"].startswith("exact for what the cache answers")

        # After the build every planned request is in the cache: the plan is made of the real answers.
        again = run_local(cfg, work, dry_run=True)["estimate"]
        assert again["calls"] == 0 and again["cached"] == len(stub.bodies) and again["exact"]["calls"] == "exact", str(
            {k: (v["calls"], v["cached"]) for k, v in again["by_phase"].items()}
        )
        assert len(stub.bodies) == dry["calls"]


def _spent(work: Path) -> float:
    usage = json.loads((work / "runs" / "plan" / "usage.json").read_text())
    return sum(row["cost_usd"] for models in usage.values() for row in models.values())


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_max_cost_stops_before_crossing_and_a_rerun_repeats_no_paid_call(tmp_path):
    """A priced build's real cost C (measured in a first workdir); in a second, --max-cost C/2 stops with
    at most C/2 spent, and a rerun with room finishes, sending each request once in all."""
    from rmb_build.core.errors import RMBError
    from rmb_build.pipeline.run import run_local
    from rmb_build.stages.classify import EmbeddingClassifier

    predicted = EmbeddingClassifier.default().predict_texts(PROMPTS)
    scenarios = {p: pred.scenario_id for p, pred in zip(PROMPTS, predicted)}
    with StubEndpoint(reply=_realistic(scenarios)) as stub:
        cfg = parse_config(_config_with_checks(tmp_path, stub.base_url))
        run_local(cfg, tmp_path / "reference")
        cost, calls = _spent(tmp_path / "reference"), len(stub.bodies)
        stub.reset()
        work = tmp_path / "work"
        with pytest.raises(RMBError, match="max_cost"):
            run_local(cfg, work, max_cost=cost / 2)
        paid = len(stub.bodies)
        assert 0 < paid < calls and _spent(work) <= cost / 2
        rest = run_local(cfg, work, dry_run=True)["estimate"]
        assert rest["cached"] == paid and rest["calls"] == calls - paid
        run_local(cfg, work, max_cost=cost * 2)
        bodies = [json.dumps(b, sort_keys=True) for b in stub.bodies]
        assert len(bodies) == len(set(bodies)) == calls  # every request sent once over both runs


def test_a_dry_run_refuses_what_the_build_refuses(tmp_path):
    """The dry run takes the build's steps: --min-gold-agreement without judge.gold is refused by both."""
    from reliability_helpers import build_config, write_queries

    from rmb_build.core.errors import RMBError
    from rmb_build.pipeline.run import run_local

    with StubEndpoint() as stub:
        cfg = parse_config(build_config(write_queries(tmp_path / "queries.jsonl"), stub.base_url))
        for dry_run in (True, False):
            with pytest.raises(RMBError, match="--min-gold-agreement needs judge.gold"):
                run_local(cfg, tmp_path / "work", dry_run=dry_run, min_gold_agreement=0.6)
        assert stub.bodies == []


def _long(text: str, n: int) -> str:
    """``text`` and a long quoted document after it: about 18 KB, past the 3,000 tokens (9 KB) a stage would
    fit an input into on an endpoint it did not know (``stages/common.DEFAULT_INPUT_TOKENS``)."""
    return f"{text}\n\nThe document:\n" + " ".join(f"line{n}-{i} of the report, with its figures." for i in range(420))


@pytest.mark.slow  # three stub builds: over 4 s under load (the tier's rule: docs/testing.md)
def test_a_dry_run_of_long_prompts_plans_them_on_the_endpoints_the_build_sees(tmp_path):
    """Prompts over 9 KB: the plan's requests are the build's (the stages read the endpoint's context off the
    planner as off the build's client), so before the build the plan's calls and prompt tokens are what the
    endpoint receives, per stage, and after it a dry run finds every request cached."""
    from reliability_helpers import QUERIES, build_config, write_queries

    from rmb_build.pipeline.run import run_local

    queries = [(qid, _long(prompt, n), scenario) for n, (qid, prompt, scenario) in enumerate(QUERIES)]
    assert min(len(p.encode()) for _, p, _ in queries) > 12_000
    work = tmp_path / "work"
    with StubEndpoint() as stub:
        cfg = parse_config(build_config(write_queries(tmp_path / "queries.jsonl", queries), stub.base_url))
        dry = run_local(cfg, work, dry_run=True)["estimate"]
        assert stub.bodies == []
        run_local(cfg, work)
        sent = _sent(stub)
        stages = Counter(_stage_of_tiny(b) for b in stub.bodies)
        again = run_local(cfg, work, dry_run=True)["estimate"]
    assert {p: row["calls"] for p, row in dry["by_phase"].items()} == stages
    assert dry["calls"] == sent["calls"]
    assert abs(dry["prompt_tokens"] / sent["prompt_tokens"] - 1) <= 0.05, (dry["prompt_tokens"], sent)
    assert again["calls"] == 0 and again["cached"] == sent["calls"] and again["exact"]["calls"] == "exact"


def _stage_of_tiny(body: dict) -> str:
    """The stage of the tiny build (``reliability_helpers.build_config``) that sent a request: routing's guard
    reads a prompt, the guard stage an answer (its prompt verdicts are routing's, cached)."""
    text = json.dumps(body["messages"])
    if body["model"] == "guard":
        return "route" if "LAST User message" in text else "guard"
    return {"judge": "judge"}.get(body["model"], "generate")
