"""openai: generative RMs through the real LLM client and a real HTTP endpoint.

Most tests talk to a small OpenAI-compatible HTTP server started here whose "model" follows a fixed
rule (always answer "A", or prefer the longer answer), so position bias, votes and the BoN rule
have exact expected values. The slow test runs the real SmolLM2 model on the embedded llama.cpp server.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.run import evaluate
from rmb_build.pipeline.config import parse_config
from rmb_build.release.read import Release


def _between(text: str, tag: str) -> str:
    return re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S).group(1)


class _Judge(BaseHTTPRequestHandler):
    rule = "first"  # first | longer
    fail_next = 0  # answer HTTP 400 (not retried) to this many requests
    prompts: list[str] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        type(self).prompts.append(prompt)
        if type(self).fail_next > 0:
            type(self).fail_next -= 1
            self._send(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
            return
        if "<answer_a>" in prompt:
            a, b = _between(prompt, "answer_a"), _between(prompt, "answer_b")
            winner = "A" if self.rule == "first" or len(a) >= len(b) else "B"
            content = json.dumps({"rationale": "rule", "winner": winner})
        else:
            content = json.dumps({"rationale": "rule", "score": min(10, 1 + len(_between(prompt, "answer")) // 10)})
        self._send(
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        )

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_url(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    _Judge.rule, _Judge.fail_next, _Judge.prompts = "first", 0, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def release() -> Release:
    q = (Turn("user", "Tell me about cats."),)
    rel = Release(name="gen", root=None)
    rel.add(
        PairwiseItem(
            "0",
            q,
            Answer("a", "Cats are small carnivorous mammals."),
            Answer("b", "Meow."),
            "Helpfulness/Chat/Discussion",
        )
    )
    rel.add(
        PairwiseItem(
            "1", q, Answer("a", "Purr."), Answer("b", "Cats sleep a lot, up to 16 hours a day."), "Harmlessness/S6"
        )
    )
    rel.add(
        BonItem(
            "0",
            q,
            Answer("a", "Cats are small carnivorous mammals."),
            (Answer("b", "Meow."), Answer("c", "Purr.")),
            "Helpfulness/Chat/Discussion",
        )
    )
    return rel


def test_always_first_judge_follows_position_everywhere(judge_url, tmp_path):
    rm = load_rm(f"openai:judge@{judge_url}", RMOptions(llm_cache_dir=str(tmp_path / "llm")))
    res = evaluate(release(), rm, tmp_path / "out", tmp_path / "cache", ties="half", progress=False)
    pos = res["bias"]["position"]
    assert pos["position_following_rate"] == 1.0 and pos["first_position_rate"] == 1.0
    assert pos["n_order_pairs"] == 4  # 2 pairwise pairs + BoN best vs 2 losers, one vote each
    # Each answer wins once: every pair ties (0.5 under half), and a tie never passes BoN.
    assert res["pairwise"]["overall"]["micro"] == 0.5 and res["bon"]["overall"]["micro"] == 0.0
    # BoN's best-vs-"Meow." pair is pairwise item 0's pair: judged once (3 unique pairs of 4), both orders.
    assert res["scoring"]["unique"] == 3 and res["scoring"]["naive"] == 4
    assert len(_Judge.prompts) == 6


def test_longer_judge_votes_both_orders_and_caches(judge_url, tmp_path):
    _Judge.rule = "longer"
    opts = RMOptions(votes=3, llm_cache_dir=str(tmp_path / "llm"))
    res = evaluate(
        release(), load_rm(f"openai:judge@{judge_url}", opts), tmp_path / "out", tmp_path / "cache", progress=False
    )
    assert res["pairwise"]["scenarios"]["Helpfulness/Chat/Discussion"]["accuracy"] == 1.0
    assert res["pairwise"]["scenarios"]["Harmlessness/S6"]["accuracy"] == 0.0
    assert res["bon"]["overall"]["micro"] == 1.0
    assert res["bias"]["position"]["position_following_rate"] == 0.0
    assert len(_Judge.prompts) == 3 * 2 * 3
    preds = [json.loads(x) for x in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert preds[0]["scores"] == {"chosen": 6, "rejected": 0}
    again = evaluate(
        release(), load_rm(f"openai:judge@{judge_url}", opts), tmp_path / "out2", tmp_path / "cache", progress=False
    )
    assert again["scoring"]["scored"] == 0 and len(_Judge.prompts) == 18
    # The key never reaches the cache or the results.
    for path in [*(tmp_path / "cache").rglob("*"), *(tmp_path / "out").rglob("*")]:
        if path.is_file():
            assert b"sk-test-not-a-real-key" not in path.read_bytes(), path


def test_pointwise_with_criteria_scores_each_text_per_scenario(judge_url, tmp_path):
    opts = RMOptions(judge_mode="pointwise", with_criteria=True, llm_cache_dir=str(tmp_path / "llm"))
    res = evaluate(
        release(), load_rm(f"openai:judge@{judge_url}", opts), tmp_path / "out", tmp_path / "cache", progress=False
    )
    assert res["pairwise"]["overall"]["micro"] == 0.5  # the length rule: item 0 right, item 1 wrong
    assert "position" not in res["bias"]
    assert res["scoring"]["unique"] == 5  # per scenario: 3 texts in Chat/Discussion, 2 in S6 ("Purr." in both)
    assert any(
        "Evaluation criteria for this scenario" in p and "Scenario: Helpfulness/Chat/Discussion (" in p
        for p in _Judge.prompts
    )


def test_failed_judgements_count_wrong_and_are_asked_again(judge_url, tmp_path):
    _Judge.rule, _Judge.fail_next = "longer", 100
    opts = RMOptions(llm_cache_dir=str(tmp_path / "llm"))
    res = evaluate(
        release(), load_rm(f"openai:judge@{judge_url}", opts), tmp_path / "out", tmp_path / "cache", progress=False
    )
    assert res["scoring"]["failed"] == 3 and res["scoring"]["scored"] == 0
    assert res["pairwise"]["overall"]["micro"] == 0.0
    _Judge.fail_next = 0
    res = evaluate(
        release(), load_rm(f"openai:judge@{judge_url}", opts), tmp_path / "out", tmp_path / "cache", progress=False
    )
    assert res["scoring"]["failed"] == 0 and res["scoring"]["scored"] == 3
    assert res["bon"]["overall"]["micro"] == 1.0


def test_endpoint_name_needs_config():
    with pytest.raises(RMBError, match="give --config"):
        load_rm("openai:gpt@myendpoint", RMOptions())
    with pytest.raises(RMBError, match="no endpoint 'other'"):
        load_rm("openai:gpt@other", RMOptions(endpoints=_embedded_config().endpoints))


def test_the_evaluator_keeps_a_configs_endpoints_not_the_config():
    """``RMOptions`` holds the endpoints an ``openai:<model>@<name>`` RM needs; a config handed to it (the older
    keyword) is read into them and not kept, and a mapping of anything but endpoints is refused naming the field."""
    cfg = _embedded_config()
    from_config = RMOptions(config=cfg)
    assert from_config.config is None and from_config.endpoints == cfg.endpoints
    rm = load_rm("openai:smollm2@local", RMOptions(endpoints=cfg.endpoints))
    assert rm.endpoint == "local" and rm.endpoints["local"] is cfg.endpoints["local"]
    with pytest.raises(RMBError, match="RMOptions endpoints"):
        RMOptions(endpoints={"local": {"embedded": "smollm2"}})
    with pytest.raises(RMBError, match="give one"):
        RMOptions(config=cfg, endpoints=cfg.endpoints)


def _embedded_config():
    ref = {"endpoint": "local", "model": "smollm2"}
    return parse_config(
        {"name": "t", "endpoints": {"local": {"embedded": "smollm2"}}, "generators": [ref], "judge": ref, "guard": ref}
    )


@pytest.mark.slow
def test_smollm2_judges_on_the_embedded_server(tmp_path):
    """The real SmolLM2-135M on llama.cpp: every verdict parses, and both orders are asked."""
    rel = Release(name="one", root=None)
    rel.add(
        PairwiseItem(
            "0",
            (Turn("user", "What is 2 + 2?"),),
            Answer("a", "2 + 2 = 4."),
            Answer("b", "5"),
            "Helpfulness/Reasoning/Logical Deduction",
        )
    )
    opts = RMOptions(endpoints=_embedded_config().endpoints, llm_cache_dir=str(tmp_path / "llm"))
    res = evaluate(rel, load_rm("openai:smollm2@local", opts), tmp_path / "out", tmp_path / "cache", progress=False)
    pos = res["bias"]["position"]
    assert pos["n_verdicts"] == 2 and res["scoring"]["failed"] == 0
    assert res["pairwise"]["overall"]["n"] == 1
