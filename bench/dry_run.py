"""Does ``rmb build --dry-run`` count what the build then sends? One build of real ShareGPT queries through
tests/helpers/stub_endpoint.py's scripted endpoint (loopback, in this process): a dry run, the build, then a
second dry run, and the endpoint's own count of what arrived, per model.

The scripted guard keeps every query in the goal the classifier gave it (so goal routing tops up
nothing: its top-up rounds depend on verdicts no dry run can know, and are reported as a bound).
Prompt tokens are compared with the character estimate the dry run uses for a remote endpoint: the
stub's own "usage" counts words, not tokens, so the bench re-counts what arrived the way the plan does.

``--style`` adds the style stage (the stub's rewrites: one distinct text per answer and style);
``--long`` takes prompts of 9-30 KB (past the 3,000-token input a stage assumes on an endpoint it does
not know); ``--move-harm`` has the guard file each harmful prompt under the next S-category, so the
guard stage moves items to another scenario's file (routing keeps the classifier's category: no gold
check measured the guard, so no unsafe verdict is evidence for it); ``--plain-first`` builds without the
style stage first, so that the dry run knows the sets and plans the style stage itself, not a bound.

Prints a table per stage, then one JSON line. Usage:
    python bench/dry_run.py [--queries 60] [--generators 4] [--samples 3] [--gold ../shared/rmb-sample/RMB_dataset]
                            [--style] [--long] [--move-harm] [--plain-first]
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


def bench_config(
    url: str, queries: int, generators: int, samples: int, gold: str | None, style: bool = False, long: bool = False
) -> dict:
    judge: dict = {"endpoint": "stub", "model": "judge", "samples": samples}
    if gold and Path(gold).is_dir():
        judge["gold"] = {"release": gold, "items": 10, "max_chars": 1500}
    chars = {"min_chars": 9_000, "max_chars": 30_000} if long else {"min_chars": 15, "max_chars": 600}
    stages = ["gather", "dedup", "classify", "generate", "judge", "guard", "build_sets"]
    extra: dict = {"style": {"endpoint": "stub", "model": "rewriter"}} if style else {}
    return {
        **extra,
        "name": "bench-dry-run",
        "endpoints": {"stub": {"base_url": url, "max_concurrency": 16, "price_per_mtok": {"input": 2.5, "output": 10}}},
        "sources": [
            {
                "kind": "sharegpt",
                "languages": ["English"],
                "max_turns": 1,
                **chars,
                "limit": queries * (80 if long else 8),
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
        "stages": [*stages, "style"] if style else stages,
    }


def keep_classified_goal(selected_file: Path, move_harm: bool = False):
    """Guard verdicts that keep each selected query's classified goal (unsafe in its S-category; with
    ``move_harm`` in the next S-category)."""
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
        if move_harm:
            return "unsafe\nS1" if cat == "multi" else f"unsafe\nS{int(cat[1:]) % 11 + 1}"
        return "unsafe\nS1,S2" if cat == "multi" else f"unsafe\n{cat}"

    return reply


def stage_of(body: dict) -> str:
    """The build stage that sent a request: the style stage's rewrites and its judge calls on them (the
    stub's rewriter answers as ``rewriter answers ...``), the gold check (RMB's own prompts: none is a
    selected query), routing's guard (a prompt), the guard stage (an answer), generate, judge."""
    text = json.dumps(body["messages"])
    model = body["model"]
    if model == "rewriter" or "rewriter answers" in text:
        return "style"
    if model == "guard":
        return "route" if "LAST User message" in text else "guard"
    return "generate" if model.startswith("gen-") else "judge"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--generators", type=int, default=4)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--gold", default=str(REPO.parent / "shared" / "rmb-sample" / "RMB_dataset"))
    ap.add_argument("--style", action="store_true", help="the style stage too")
    ap.add_argument("--long", action="store_true", help="prompts of 9-30 KB")
    ap.add_argument("--move-harm", action="store_true", help="the guard stage moves harmful items to another S")
    ap.add_argument("--plain-first", action="store_true", help="with --style: build without the style stage first")
    args = ap.parse_args()

    from rmb_build.pipeline.env import configure_prefect

    configure_prefect(REPO)
    from stub_endpoint import StubEndpoint

    from rmb_build.llm import ChatRequest
    from rmb_build.llm.cost import estimate_prompt_tokens
    from rmb_build.pipeline.config import parse_config
    from rmb_build.pipeline.run import run_build

    with tempfile.TemporaryDirectory(prefix="rmb-bench-dry-") as work, StubEndpoint() as stub:
        raw = bench_config(stub.base_url, args.queries, args.generators, args.samples, args.gold, args.style, args.long)
        cfg = parse_config(raw)
        t0 = time.time()
        reply = keep_classified_goal(Path(work) / "runs" / cfg.name / "selected.jsonl", args.move_harm)
        if args.plain_first:  # the same build without the style stage first: every reply before it is cached
            stub.reply = reply
            plain = {k: v for k, v in raw.items() if k != "style"}
            run_build(parse_config({**plain, "stages": [s for s in raw["stages"] if s != "style"]}), work)
            stub.reset()
        dry = run_build(cfg, work, dry_run=True)["estimate"]
        stub.reply = reply
        run_build(cfg, work)
        sent = Counter(f"stub/{b['model']}" for b in stub.bodies)
        sent_by_stage = Counter(stage_of(b) for b in stub.bodies)
        arrived = Counter()  # prompt tokens per stage, counted as the plan counts them
        for b in stub.bodies:
            req = ChatRequest("stub", b["model"], tuple((m["role"], m["content"]) for m in b["messages"]))
            arrived[stage_of(b)] += estimate_prompt_tokens(req)
        arrived_prompt = sum(arrived.values())
        again = run_build(cfg, work, dry_run=True)["estimate"]
        stub.reset()
        run_build(cfg, work)
        rerun_sent = len(stub.bodies)
        seconds = time.time() - t0
    bounds = dry["estimates"]
    style_bound = bounds.get("style_calls_at_most", 0)
    print(f"{'stage':<10} {'planned':>8} {'sent':>6} {'after build: to send':>21}")
    for stage in sorted(set(sent_by_stage) | set(dry["by_phase"]) | set(again["by_phase"])):
        planned = dry["by_phase"].get(stage, {}).get("calls", 0)
        shown = f"{planned}" + (f" + bound {style_bound}" if stage == "style" and style_bound else "")
        left = again["by_phase"].get(stage, {}).get("calls", 0)
        print(f"{stage:<10} {shown:>8} {sent_by_stage.get(stage, 0):>6} {left:>21}")
    planned_all = dry["calls"] + style_bound + bounds.get("route_top_up_calls_at_most", 0)
    total_sent = sum(sent.values())
    print(
        f"{'total':<10} {dry['calls']:>8} {total_sent:>6}   (with the estimates' bounds: {planned_all}; "
        f"dry run after the build: {again['calls']} to send, {again['cached']} cached; a rerun sent {rerun_sent})"
    )
    planned_ex_style = dry["prompt_tokens"] - dry["by_phase"].get("style", {}).get("prompt_tokens", 0)
    ratio_ex_style = planned_ex_style / max(arrived_prompt - arrived["style"], 1)
    print(
        f"prompt tokens: planned {dry['prompt_tokens']}, the same count over what arrived {arrived_prompt} "
        f"(ratio {dry['prompt_tokens'] / arrived_prompt:.3f}); the stages before style: ratio {ratio_ex_style:.3f}"
    )
    print(
        json.dumps(
            {
                "queries": args.queries,
                "generators": args.generators,
                "samples": args.samples,
                "style": args.style,
                "long": args.long,
                "move_harm": args.move_harm,
                "plain_first": args.plain_first,
                "planned_calls": dry["calls"],
                "planned_with_bounds": planned_all,
                "sent_calls": total_sent,
                "planned_with_bounds_over_sent": round(planned_all / total_sent, 4),
                "top_up_bound": bounds.get("route_top_up_calls_at_most", 0),
                "style_bound": style_bound,
                "after_build_to_send": again["calls"],
                "after_build_cached": again["cached"],
                "rerun_sent": rerun_sent,
                "prompt_tokens_ratio": round(dry["prompt_tokens"] / arrived_prompt, 4),
                "prompt_tokens_ratio_before_style": round(ratio_ex_style, 4),
                "after_build_exact": again["exact"]["calls"],
                "seconds": round(seconds, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
