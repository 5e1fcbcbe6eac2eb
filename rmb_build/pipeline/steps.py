"""Small in-flow steps between the stage tasks: selection, stats merging, files a run keeps, cost estimate."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from rmb_build.core.records import Query
from rmb_build.core.taxonomy import parse_scenario_id
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.run_state import merge_stats


def stats_of(value: Any) -> dict[str, Any]:
    """A stage result's stats; counts for results that carry none."""
    stats = getattr(value, "stats", None)
    if isinstance(stats, Mapping):
        return dict(stats)
    if hasattr(value, "kept") and hasattr(value, "removed"):
        return {"kept": len(value.kept), "removed": len(value.removed)}
    if isinstance(value, Sequence):
        return {"items": len(value)}
    return {}


def brief(stats: Mapping[str, Any], limit: int = 8) -> str:
    """The top-level numbers of ``stats`` as one short log line."""
    flat = (
        stats
        if any(_is_number(v) for v in stats.values())
        else merge_stats(v for v in stats.values() if isinstance(v, Mapping))
    )  # per-source stats: summed
    nums = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in flat.items() if _is_number(v)]
    return ", ".join(nums[:limit]) or "done"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def count_by(records: Iterable[Any], attr: str) -> dict[str, int]:
    return dict(Counter(str(getattr(r, attr)) for r in records))


def goal_counts(queries: Iterable[Query]) -> dict[str, int]:
    return dict(Counter(parse_scenario_id(q.scenario_id).goal if q.scenario_id else "unclassified" for q in queries))


def write_queries_file(queries: Sequence[Query], path: Path) -> None:
    from rmb_build.stages.gather import write_queries

    write_queries(queries, path)


def read_queries_file(path: Path) -> list[Query]:
    from rmb_build.stages.gather import read_queries

    return read_queries(path)


def apply_guard_scenarios(queries: Sequence[Query], labels: Sequence[Any]) -> list[Query]:
    from rmb_build.stages.guard import apply_prompt_scenarios

    return apply_prompt_scenarios(queries, labels)


async def plan_build(
    cfg: BuildConfig,
    stages: Sequence[str],
    to_classify: Sequence[Query],
    queries: Sequence[Query],
    selected: Sequence[Query],
    not_selected: dict[str, int],
    cache: Any,
    store_dir: str,
) -> dict[str, Any]:
    """The dry run's plan: the build's LLM stages run in the build's order against a ``PlanningClient``
    (``rmb_build.llm.planning``), which answers from ``cache`` and counts what it cannot answer: LLM
    classification of ``to_classify``, the gold check, goal routing of ``selected`` (from the classified
    ``queries``), generation, then judging and guarding of every answer (real where cached, a stand-in
    per request otherwise). Returns the planner's report plus ``exact`` (what each figure is) and
    ``estimates`` (what the plan cannot count)."""
    from rmb_build.llm.planning import PlanningClient
    from rmb_build.pipeline.label_checks import plan_routing
    from rmb_build.stages import generate, gold, guard, judge
    from rmb_build.stages.classify import LLMClassifier
    from rmb_build.stages.sets import finished

    planner = PlanningClient(cfg.endpoints, cache)
    estimates: dict[str, Any] = {}
    if "classify" in stages and cfg.classifier.method == "llm":
        with planner.phase("classify"):
            planner.plan(LLMClassifier(None, cfg.classifier.endpoint, cfg.classifier.model).plan(to_classify))
    if "generate" in stages:
        gold_section = None
        if cfg.judge.gold is not None:  # run against the planner: cached replies give the real section
            with planner.phase("gold"):
                gold_section, _ = await gold.gold_check(cfg, planner)
        if cfg.route.enabled and "guard" in stages:
            with planner.phase("route"):
                routed = await plan_routing(
                    cfg, queries, list(selected), not_selected, planner, store_dir, gold_section
                )
            selected = routed.selected
            # a verdict the plan stood in for may route its query away: each could draw a replacement a round
            unknown = sum(1 for c in planner.calls.values() if c.phase == "route" and c.cached is None)
            bound = min(unknown * cfg.route.top_up_rounds, routed.top_up_room)
            if bound:
                estimates["route_top_up_calls_at_most"] = bound
        with planner.phase("generate"):
            answers = finished((await generate.generate(selected, cfg.generators, planner)).records)
        if "judge" in stages:
            with planner.phase("judge"):
                await judge.judge(selected, answers, cfg.judge, planner)
            with planner.phase("guard"):
                await guard.guard(selected, answers, cfg.guard, planner)
    report = planner.report()
    stand_ins = sum(1 for c in planner.calls.values() if c.cached is None and c.phase == "generate")
    return {
        **report,
        "estimates": estimates,
        "exact": {
            "calls": (
                "exact"
                if not estimates and not stand_ins
                else "exact for what the cache answers; judge and guard calls on answers not yet generated are an upper "
                "bound (an answer cut at max_tokens is not judged)"
                + ("; goal routing's top-up rounds are not counted, see estimates" if estimates else "")
            ),
            "prompt_tokens": "; ".join(f"{name}: {how}" for name, how in report["prompt_tokens_method"].items()),
            "completion_tokens": "upper bound: each call's max_tokens",
            "completion_tokens_estimate": "estimate: the mean of cached replies of the same endpoint, model and phase",
            "cost_usd": "upper bound: prompt estimate plus max_tokens at each endpoint's price_per_mtok",
        },
    }
