"""Does ``rmb build --dry-run`` count what the build then sends? One build of real ShareGPT queries through
tests/helpers/stub_endpoint.py's scripted endpoint (loopback, in this process): a dry run, the build, then a
second dry run, and the endpoint's own count of what arrived, per model.

The scripted guard keeps every query in the goal the classifier gave it (so goal routing tops up
nothing: its top-up rounds depend on verdicts no dry run can know, and are reported as a bound).
Prompt tokens are compared with the character estimate the dry run uses for a remote endpoint: the
stub's own "usage" counts words, not tokens, so the bench re-counts what arrived the way the plan does.

Prints a table, then one JSON line. Usage:
    python bench/dry_run.py [--queries 60] [--generators 4] [--samples 3] [--gold ../shared/rmb-sample/RMB_dataset]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "helpers"))


def bench_config(url: str, queries: int, generators: int, samples: int, gold: str | None) -> dict:
    judge: dict = {"endpoint": "stub", "model": "judge", "samples": samples}
    if gold and Path(gold).is_dir():
        judge["gold"] = {"release": gold, "items": 10, "max_chars": 1500}
    return {
        "name": "bench-dry-run",
        "endpoints": {"stub": {"base_url": url, "max_concurrency": 16, "price_per_mtok": {"input": 2.5, "output": 10}}},
        "sources": [
            {
                "kind": "sharegpt",
                "languages": ["English"],
                "max_turns": 1,
                "min_chars": 15,
                "max_chars": 600,
                "limit": queries * 8,
            }
        ],
        "classifier": {"method": "embedding"},
        "select": {"total": queries, "min_per_goal": queries // 5, "per_scenario": 4, "seed": 0},
        "generators": [
            {"endpoint": "stub", "model": f"gen-{k}", "name": f"gen-{k}", "max_tokens": 64, "temperature": 0.7}
            for k in range(generators)
        ],
        "judge": judge,
        "guard": {"endpoint": "stub", "model": "guard"},
        "route": {"scope": "selected", "top_up_rounds": 2},
        "stages": ["gather", "dedup", "classify", "generate", "judge", "guard", "build_sets"],
    }


def keep_classified_goal(selected_file: Path):
    """Guard verdicts that keep each selected query's classified goal (unsafe in its S-category)."""
    scenarios: dict[str, str] = {}

    def reply(body: dict):
        if body["model"] != "guard":
            return None
        if "LAST User message" not in body["messages"][-1]["content"]:
            return "safe"
        if not scenarios:
            from rmb_build.stages.gather import read_queries

            scenarios.update({q.conversation[-1].content: q.scenario_id for q in read_queries(selected_file)})
        text = body["messages"][-1]["content"]
        sid = next((s for p, s in scenarios.items() if p in text), "")
        if not sid.startswith("Harmlessness/"):
            return "safe"
        cat = sid.rsplit("/", 1)[1]
        return "unsafe\nS1,S2" if cat == "multi" else f"unsafe\n{cat}"

    return reply


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--generators", type=int, default=4)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--gold", default=str(REPO.parent / "shared" / "rmb-sample" / "RMB_dataset"))
    args = ap.parse_args()

    from rmb_build.pipeline.env import configure_prefect

    configure_prefect(REPO)
    from stub_endpoint import StubEndpoint

    from rmb_build.llm import ChatRequest
    from rmb_build.llm.cost import estimate_prompt_tokens
    from rmb_build.pipeline.config import parse_config
    from rmb_build.pipeline.run import run_build

    with tempfile.TemporaryDirectory(prefix="rmb-bench-dry-") as work, StubEndpoint() as stub:
        cfg = parse_config(bench_config(stub.base_url, args.queries, args.generators, args.samples, args.gold))
        t0 = time.time()
        dry = run_build(cfg, work, dry_run=True)["estimate"]
        reply = keep_classified_goal(Path(work) / "runs" / cfg.name / "selected.jsonl")
        stub.reply = reply
        run_build(cfg, work)
        sent = Counter(f"stub/{b['model']}" for b in stub.bodies)
        arrived_prompt = sum(
            estimate_prompt_tokens(
                ChatRequest("stub", b["model"], tuple((m["role"], m["content"]) for m in b["messages"]))
            )
            for b in stub.bodies
        )
        again = run_build(cfg, work, dry_run=True)["estimate"]
        seconds = time.time() - t0
    print(f"{'model':<14} {'planned':>8} {'sent':>6}")
    for model in sorted(set(sent) | set(dry["by_model"])):
        print(f"{model:<14} {dry['by_model'].get(model, {}).get('calls', 0):>8} {sent.get(model, 0):>6}")
    print(
        f"{'total':<14} {dry['calls']:>8} {sum(sent.values()):>6}   (dry run after the build: {again['calls']} to "
        f"send, {again['cached']} cached)"
    )
    print(
        f"prompt tokens: planned {dry['prompt_tokens']}, the same count over what arrived {arrived_prompt} "
        f"(ratio {dry['prompt_tokens'] / arrived_prompt:.3f})"
    )
    print(
        json.dumps(
            {
                "queries": args.queries,
                "generators": args.generators,
                "samples": args.samples,
                "planned_calls": dry["calls"],
                "sent_calls": sum(sent.values()),
                "top_up_bound": dry["estimates"].get("route_top_up_calls_at_most", 0),
                "after_build_to_send": again["calls"],
                "after_build_cached": again["cached"],
                "prompt_tokens_ratio": round(dry["prompt_tokens"] / arrived_prompt, 4),
                "seconds": round(seconds, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
