"""``rmb downstream --dry-run`` runs the check's own steps against the planning client: what it plans, per stage
and per reward model, is what the run then sends and scores (issue 39)."""

from __future__ import annotations

import json

import pytest
from stub_endpoint import StubEndpoint, request_stage

from rmb_build.analysis.downstream.config import parse_downstream_config
from rmb_build.analysis.downstream.run import run_downstream

N, PROMPTS = 3, 4
GRADERS = {
    "pointwise": {"kind": "pointwise", "endpoint": "stub", "model": "grader"},
    "reference": {"kind": "reference", "endpoint": "stub", "model": "grader",
                  "reference": {"endpoint": "stub", "model": "ref", "max_tokens": 32}},
}  # fmt: skip


def _sample(body: dict):
    """A policy sample that differs by seed (the plan's stand-ins are distinct texts; equal real samples would
    be graded and scored once)."""
    if request_stage(body) == "generate" and body["model"] == "policy":
        return f"sample {body.get('seed')} of {body['messages'][-1]['content'][:20]}"
    return None


def _config(tmp, stub, grader: str):
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Question {i}: why? " * (i + 1)}) + "\n" for i in range(PROMPTS)))
    return parse_downstream_config(
        {
            "name": "plan",
            "endpoints": {"stub": {"base_url": stub.base_url, "api_key_env": "RMB_TEST_NO_KEY"}},
            "prompts": {
                "sources": [{"kind": "jsonl", "path": str(prompts)}],
                "default_scenario": "Helpfulness/Chat/Discussion",
                "holdout": {"releases": []},
            },
            "policy": {"endpoint": "stub", "model": "policy", "n": N, "temperature": 0.8, "max_tokens": 32},
            "grader": GRADERS[grader],
            "reward_models": ["baseline:length", "openai:judge@stub"],  # a generative RM asks the endpoint too
            "bootstrap": {"resamples": 100},
        }
    )


def _planned(plan):
    return {stage: row["calls"] for stage, row in plan["estimate"]["by_phase"].items() if row["calls"]}


@pytest.mark.parametrize("grader", sorted(GRADERS))
def test_the_dry_run_plans_per_stage_what_the_run_then_sends(tmp_path, grader):
    with StubEndpoint(reply=_sample) as stub:
        cfg = _config(tmp_path, stub, grader)
        run_dir = tmp_path / "run"
        plan = run_downstream(cfg, run_dir, dry_run=True)
        assert not stub.requests  # the plan sends nothing
        result = run_downstream(cfg, run_dir)
        sent = {stage: c["requests"] for stage, c in result["calls"].items() if c["requests"]}
        assert _planned(plan) == sent  # the same stages, named alike, the same number of requests
        assert plan["estimate"]["calls"] == len(stub.requests) == sum(sent.values())
        assert sent["reward_models"] == N * PROMPTS  # the generative RM's requests are in the plan
        texts = {key: t["to_score"] for key, t in plan["texts_to_score"].items()}
        assert texts == {key: s["scored"] for key, s in result["scoring"].items()}

        again = run_downstream(cfg, run_dir, dry_run=True)  # after the run: everything is cached
        assert again["estimate"]["calls"] == 0
        # the RM's texts are in the score cache, so its requests are not even asked of the LLM cache
        assert again["estimate"]["cached"] == plan["estimate"]["calls"] - sent["reward_models"]
        assert all(t["to_score"] == 0 for t in again["texts_to_score"].values())
