"""Small in-flow steps between the stage tasks: selection, stats merging, files a run keeps, cost estimate."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from rmb_build.config import BuildConfig
from rmb_build.records import Query
from rmb_build.build.run_state import merge_stats
from rmb_build.taxonomy import parse_scenario_id

RAW_QUERIES = "queries.jsonl"
DEDUPED_QUERIES = "deduped.jsonl"
SELECTED_QUERIES = "selected.jsonl"


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
    flat = stats if any(_is_number(v) for v in stats.values()) else \
        merge_stats(v for v in stats.values() if isinstance(v, Mapping))  # per-source stats: summed
    nums = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in flat.items() if _is_number(v)]
    return ", ".join(nums[:limit]) or "done"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def count_by(records: Iterable[Any], attr: str) -> dict[str, int]:
    return dict(Counter(str(getattr(r, attr)) for r in records))


def goal_counts(queries: Iterable[Query]) -> dict[str, int]:
    return dict(Counter(parse_scenario_id(q.scenario_id).goal if q.scenario_id else "unclassified" for q in queries))


def write_queries_file(queries: Sequence[Query], path: Path) -> None:
    from rmb_build.build.gather import write_queries

    write_queries(queries, path)


def read_queries_file(path: Path) -> list[Query]:
    from rmb_build.build.gather import read_queries

    return read_queries(path)


def apply_guard_scenarios(queries: Sequence[Query], labels: Sequence[Any]) -> list[Query]:
    from rmb_build.build.guard import apply_prompt_scenarios

    return apply_prompt_scenarios(queries, labels)


def jsonable(value: Any) -> Any:
    """The LLM client's usage (or any stats object) as JSON."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return str(value)


def planned_requests(to_classify: Sequence[Query], selected: Sequence[Query], cfg: BuildConfig,
                     stages: Sequence[str]) -> list[Any]:
    """The LLM requests a build sends, from the stages' own plans: LLM classification of
    ``to_classify``; the gold check and goal routing (the first round: replacements drawn for
    routed-away queries depend on the verdicts); generation, judging and guarding of ``selected``.
    Judge and guard are planned on stand-in answers that use their generator's whole ``max_tokens``
    (answers do not exist yet). A request planned twice (routing and the guard stage both ask about
    a harmful prompt) is sent once, so it is counted once."""
    from rmb_build.build import generate, gold, guard, judge
    from rmb_build.build.classify import LLMClassifier

    out: list[Any] = []
    if "classify" in stages and cfg.classifier.method == "llm":
        out += LLMClassifier(None, cfg.classifier.endpoint, cfg.classifier.model).plan(to_classify)
    if "generate" in stages and cfg.judge.gold is not None:
        out += gold.plan(cfg)
    if "generate" in stages and "guard" in stages and cfg.route.enabled:
        out += guard.plan(selected, [], cfg.guard, cfg.endpoints, every_prompt=True)
    if "generate" in stages:
        out += generate.plan(selected, cfg.generators, cfg.endpoints)
    if "judge" in stages:
        answers = generate.assumed_responses(selected, cfg.generators, cfg.endpoints)
        out += judge.plan(selected, answers, cfg.judge, cfg.endpoints)
        out += guard.plan(selected, answers, cfg.guard, cfg.endpoints)
    return _distinct(out, cfg.endpoints)


def _distinct(requests: Sequence[Any], endpoints: Mapping[str, Any]) -> list[Any]:
    """``requests`` without repeats, as the LLM cache tells two requests apart."""
    from rmb_build.llm.cache import request_key
    from rmb_build.llm.endpoint import endpoint_identity

    seen: set[str] = set()
    out = []
    for req in requests:
        ep = endpoints[req.endpoint]
        key = request_key(req, endpoint_identity(ep), ep.structured_output)
        if key not in seen:
            seen.add(key)
            out.append(req)
    return out


def estimate_cost(requests: Sequence[Any], cfg: BuildConfig, cache_dir: Path | None = None) -> dict[str, Any]:
    """Calls, tokens and USD of sending ``requests`` (those already in the run's LLM cache cost nothing)."""
    from rmb_build.llm import ResponseCache, estimate

    cache = ResponseCache(cache_dir) if cache_dir is not None and cache_dir.exists() else None
    try:
        return estimate(requests, cfg.endpoints, cache=cache)
    finally:
        if cache is not None:
            cache.close()
