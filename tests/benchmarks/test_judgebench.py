"""JudgeBench: its released files read without ``--format``, and its figures against the authors' own
``compute_final_metrics``.

ScalerLab/JudgeBench at commit e2c52c284e735e139b3daa61c206ee208f36c461 carries no licence, so none of its
code is copied: ``utils/metrics.py`` (``compute_final_metrics`` and ``flip_judgment``) and the two data files
are read at test time from a git checkout of it (``JUDGEBENCH_REPO``, else a mirror beside the project;
skipped visibly where absent). The pairs handed to it are built as ``run_judge.py`` builds them: a reward
model's one judgment per pair, ``"A>B" if score_A > score_B else "B>A"`` (``utils/judges.py``'s reward-model
judges), and for a judge ``judge(question, A, B)`` then ``judge(question, B, A)``; per category it is called
with ``run_judge.py``'s prefixes and overall with ``""``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from formats_helpers import ans, evaluate, write_jsonl
from stub_endpoint import StubEndpoint

from rmb_build.benchmarks import judgebench
from rmb_build.benchmarks.formats import detect_format, open_release
from rmb_build.benchmarks.tables import local_rows
from rmb_build.cli import main
from rmb_build.evaluate.protocols import default_for

REPO = Path(__file__).resolve().parents[2]
COMMIT = "e2c52c284e735e139b3daa61c206ee208f36c461"
DATA = {
    "data/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl": 350,
    "data/dataset=judgebench,response_model=claude-3-5-sonnet-20240620.jsonl": 270,
}
# run_judge.py's loop: for source in [...]: compute_final_metrics(..., include_fn=lambda x: x["source"].startswith(source))
PREFIXES = {
    "mmlu-pro": "knowledge",
    "livebench-reasoning": "reasoning",
    "livebench-math": "math",
    "livecodebench": "coding",
}
SOURCES = ["mmlu-pro-law", "mmlu-pro-math", "livebench-reasoning", "livebench-math", "livecodebench", "other-set"]


def checkout() -> str:
    candidates = [os.environ.get("JUDGEBENCH_REPO", "")] + [
        str(base / ".mirror" / "ScalerLab+JudgeBench" / "repo") for base in (REPO.parent, REPO.parent.parent)
    ]
    repo = next((c for c in candidates if c and Path(c).is_dir()), None)
    if repo is None:
        pytest.skip("no checkout of ScalerLab/JudgeBench (set JUDGEBENCH_REPO to its git directory)")
    return repo


def authors_file(path: str) -> str:
    return subprocess.run(
        ["git", "-C", checkout(), "show", f"{COMMIT}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def compute_final_metrics():
    """utils/metrics.py, run as is."""
    namespace: dict = {}
    exec(authors_file("utils/metrics.py"), namespace)
    return namespace["compute_final_metrics"]


def oracle(pairs: list[dict], reverse_order: bool) -> dict[str, float]:
    """The authors' figures, in percent: per category (run_judge.py's prefixes) and overall."""
    metric = compute_final_metrics()
    out = {"overall": metric(pairs, reverse_order)}
    for prefix, name in PREFIXES.items():
        out[name] = metric(pairs, reverse_order, include_fn=lambda x, p=prefix: x["source"].startswith(p))
    return out


def ours(bench: dict) -> dict[str, float]:
    return {
        "overall": 100 * bench["headline"],
        **{c: 100 * bench["sections"][c]["accuracy"] for c in PREFIXES.values()},
    }


def rows(rng: np.random.Generator, n: int, response) -> list[dict]:
    out = []
    for k in range(n):
        source = SOURCES[k % len(SOURCES)]
        out.append(
            {
                "pair_id": f"p{k}",
                "original_id": k,
                "source": source,
                "question": f"question {k}?",
                "response_model": "m",
                "response_A": response(rng, k, "A"),
                "response_B": response(rng, k, "B"),
                "label": "A>B" if rng.random() < 0.5 else "B>A",
            }
        )
    return out


@pytest.mark.parametrize("path,n", list(DATA.items()))
def test_released_files_are_read_without_format(tmp_path, path, n):
    file = tmp_path / Path(path).name
    file.write_text(authors_file(path), encoding="utf-8")
    assert detect_format(local_rows(file, None)) == judgebench.FORMAT
    release = open_release(file)
    assert release.benchmark_format == judgebench.FORMAT and len(release.pairwise) == n
    assert {i.scenario_id for i in release.pairwise} == set(PREFIXES.values())
    first = json.loads(file.read_text(encoding="utf-8").splitlines()[0])
    item = release.pairwise[0]
    better = first["response_A"] if first["label"] == "A>B" else first["response_B"]
    assert item.uid == first["pair_id"] and item.chosen.answer == better


def test_default_protocol_and_format_choice(capsys):
    assert default_for(judgebench.FORMAT) == "judgebench"
    with pytest.raises(SystemExit):
        main(["evaluate", "--format", "no-such-format", "--release", "x", "--rm", "baseline:length", "--out", "o"])
    assert "known: rmb, judgebench, rewardbench, rewardbench2, rm-bench" in capsys.readouterr().err  # the registry


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reward_model_figures_are_compute_final_metrics(tmp_path, seed):
    """Scores are small integers, so ties occur on both sides: JudgeBench's rule makes a tie right only
    when B is the better response."""
    rng = np.random.default_rng(seed)
    data = rows(rng, 60, lambda rng, k, side: ans(float(rng.integers(0, 3)), f"{side}{k}"))
    res = evaluate(tmp_path, write_jsonl(tmp_path / "jb.jsonl", data), *(["--format", "judgebench"] if seed else []))
    assert res["protocol"]["name"] == "judgebench"
    bench = res["benchmark"]
    assert bench["format"] == judgebench.FORMAT

    def score(text: str) -> float:
        return float(text.split("|", 1)[0])

    judged = [
        {**r, "judgments": [{"decision": "A>B" if score(r["response_A"]) > score(r["response_B"]) else "B>A"}]}
        for r in data
    ]
    assert ours(bench) == pytest.approx(oracle(judged, reverse_order=False), abs=1e-9)
    assert bench["sections"]["other-set"]["pairs"] == 10  # reported, and counted in the overall figure
    lo, hi = bench["overall"]["interval"]
    assert lo < bench["headline"] < hi


def _judge_rule(text: str, first: str, second: str) -> str:
    """The stub judge: pairs whose question (in ``text``) says ``rule=first`` always pick the first answer
    shown (inconsistent across orders), ``rule=good`` the answer marked GOOD, ``rule=bad`` the other one."""
    rule = text.split("rule=", 1)[1].split()[0]
    if rule == "first":
        return "A"
    good_first = "GOOD" in first
    return "A" if good_first == (rule == "good") else "B"


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


@pytest.mark.slow  # ~20 s: 2 x 48 judgements through the HTTP stub
def test_judge_figures_are_compute_final_metrics(tmp_path, monkeypatch):
    """A judge through the stub endpoint, both orders; some pairs are inconsistent (position-following)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    rng = np.random.default_rng(7)
    rules = ["first", "good", "bad", "good"]
    data = []
    for r in rows(rng, 48, lambda rng, k, side: f"answer {side}{k}"):
        better = "response_A" if r["label"] == "A>B" else "response_B"
        r[better] += " GOOD"
        r["question"] += f" rule={rules[int(rng.integers(0, len(rules)))]} end"
        data.append(r)

    def reply(req: dict) -> str:
        prompt = req["messages"][-1]["content"]  # the question's "rule=..." is in the rendered conversation
        winner = _judge_rule(prompt, _between(prompt, "answer_a"), _between(prompt, "answer_b"))
        return json.dumps({"rationale": "rule", "winner": winner})

    with StubEndpoint() as stub:
        stub.reply = reply
        code = main(
            [
                "evaluate",
                "--release",
                str(write_jsonl(tmp_path / "jb.jsonl", data)),
                "--rm",
                f"openai:judge@{stub.base_url}",
                "--judge-mode",
                "pairwise",
                "--out",
                str(tmp_path / "out"),
                "--cache",
                str(tmp_path / "cache"),
                "--no-progress",
                "--bootstrap",
                "20",
            ]
        )
    assert code == 0
    bench = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["benchmark"]

    def decision(question: str, first: str, second: str) -> dict:
        return {"decision": "A>B" if _judge_rule(question, first, second) == "A" else "B>A"}

    judged = [
        {
            **r,
            "judgments": [
                decision(r["question"], r["response_A"], r["response_B"]),
                decision(r["question"], r["response_B"], r["response_A"]),
            ],
        }
        for r in data
    ]
    assert any("rule=first" in r["question"] for r in data)  # inconsistent pairs: neither right nor wrong
    assert ours(bench) == pytest.approx(oracle(judged, reverse_order=True), abs=1e-9)
