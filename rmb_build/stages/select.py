"""Select: the classified queries that go on to generation, balanced over scenarios and goals.

A plain stage over typed records: :func:`select` applies the config (``select``, ``scenarios``) and
says why every other query was left out; :func:`select_balanced` is the seeded round robin it uses
(goal routing draws replacements with it too).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from rmb_build.core import paths as P
from rmb_build.core.records import Query
from rmb_build.core.taxonomy import GOALS, parse_scenario_id
from rmb_build.stages.classify import abstained
from rmb_build.stages.gather import write_queries
from rmb_build.stages.options import SelectConfig
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the run is the pipeline's, a layer above
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Flow


def select(
    queries: Sequence[Query], sel: SelectConfig, scenarios: Sequence[str] | None = None
) -> tuple[list[Query], dict[str, int]]:
    """The classified queries that go on to generation (``sel``; only ``scenarios`` where given), and
    why the others did not (reason -> count)."""
    dropped: Counter = Counter()
    pool = []
    for q in queries:
        if abstained(q):
            dropped["classifier abstained (confidence below its threshold)"] += 1
        elif not q.scenario_id:
            dropped["not classified"] += 1
        elif scenarios is not None and q.scenario_id not in scenarios:
            dropped["scenario not in the config's 'scenarios'"] += 1
        else:
            pool.append(q)
    if sel.total is None and sel.per_scenario is None:
        return pool, dict(dropped)
    chosen = select_balanced(
        pool, total=sel.total or len(pool), min_per_goal=sel.min_per_goal, per_scenario=sel.per_scenario, seed=sel.seed
    )
    if len(pool) > len(chosen):
        dropped["not selected (balanced subset: select.total / select.per_scenario)"] += len(pool) - len(chosen)
    return list(chosen), dict(dropped)


def _sureness(q: Query) -> float:
    """How sure the query's scenario is: a person's label (a label set) above any classifier confidence."""
    return 2.0 if q.labelled_by else (q.confidence or 0.0)


def short_goals(
    selected: Sequence[Query], pool: Sequence[Query], min_per_goal: int, scenarios: Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """The goals (of ``scenarios`` where given) with fewer selected queries than ``min_per_goal``, with
    how many queries of the ``pool`` (labelled after the evidence rule) had that goal."""

    def goals_of(queries: Sequence[Query]) -> Counter:
        return Counter(
            parse_scenario_id(q.scenario_id).goal
            for q in queries
            if q.scenario_id and (scenarios is None or q.scenario_id in scenarios)
        )

    have, available = goals_of(selected), goals_of(pool)
    goals = GOALS if scenarios is None else {parse_scenario_id(s).goal for s in scenarios}
    return {
        g: {"wanted": min_per_goal, "selected": have[g], "with_evidence": available[g]}
        for g in GOALS
        if g in goals and have[g] < min_per_goal
    }


def select_balanced(
    queries: Sequence[Query],
    total: int | None,
    min_per_goal: int | Mapping[str, int] = 0,
    per_scenario: int | None = None,
    seed: int = 0,
) -> list[Query]:
    """A subset of classified queries spread over scenarios, in input order.

    Scenarios take turns (round robin, surest query first, ties in seeded random order), so
    every scenario present gets queries before any gets many. First each goal is filled up to
    ``min_per_goal`` (an int for every goal, or per goal name) where it has enough queries, then
    all scenarios share what is left of ``total``; no scenario gets more than ``per_scenario``.
    Queries without a scenario (unclassified, or the classifier abstained) are never picked; within a
    scenario, a label set's labels come first, then the most confident.
    """
    total = len(queries) if total is None else total
    need = {g: min_per_goal for g in GOALS} if isinstance(min_per_goal, int) else dict(min_per_goal)
    rng = random.Random(seed)
    pools: dict[str, list[int]] = defaultdict(list)
    for n, q in enumerate(queries):
        if q.scenario_id:
            pools[q.scenario_id].append(n)
    for idx in pools.values():
        rng.shuffle(idx)
        idx.sort(key=lambda n: -_sureness(queries[n]))  # stable: shuffled order breaks ties
        if per_scenario is not None:
            del idx[per_scenario:]
    order = sorted(pools)
    rng.shuffle(order)
    picked: list[int] = []

    def take(scenarios: list[str], budget: int) -> None:
        while budget > 0 and any(pools[s] for s in scenarios):
            for sid in scenarios:
                if budget > 0 and pools[sid]:
                    picked.append(pools[sid].pop(0))
                    budget -= 1

    for goal, n in need.items():
        goal_scen = [s for s in order if parse_scenario_id(s).goal == goal]
        take(goal_scen, min(n, total - len(picked)))
    take(order, total - len(picked))
    return [queries[n] for n in sorted(picked)]


@dataclass
class Selection:
    """What goes on to generation, why the other queries did not (reason -> count), and the goals short
    of ``select.min_per_goal`` (:func:`short_goals`)."""

    selected: list[Query]
    not_selected: dict[str, int]
    short_goals: dict[str, dict[str, int]]


def write_selection(
    selected: Sequence[Query],
    pool: Sequence[Query],
    not_selected: dict[str, int],
    sel: SelectConfig,
    scenarios: Sequence[str] | None,
    path: str,
) -> Selection:
    """``selected`` (from the classified ``pool``) written to ``path`` for the run, with its short goals."""
    write_queries(selected, Path(path))
    return Selection(list(selected), not_selected, short_goals(selected, pool, sel.min_per_goal, scenarios))


def select_batch(
    env: StageEnv, queries: Sequence[Query], scenarios: Sequence[str] | None, path: str
) -> StageResult[Selection]:
    """The stage's work: :func:`select` over the classified ``queries`` (``env.section``: ``select:``),
    the selection written to ``path``."""
    chosen, not_selected = select(queries, env.section, scenarios)
    return StageResult(write_selection(chosen, queries, not_selected, env.section, scenarios, path))


def goal_counts(queries: Iterable[Query]) -> dict[str, int]:
    return dict(Counter(parse_scenario_id(q.scenario_id).goal if q.scenario_id else "unclassified" for q in queries))


def take_selection(run: BuildRun, flow: Flow, chosen: Selection) -> None:
    """``chosen`` as the run's selection from here on: the flow's selected queries, the accounting's buckets."""
    flow.selected = chosen.selected
    run.acc.select(chosen)
    flow.result["selected"] = len(chosen.selected)


async def select_from_pool(run: BuildRun, flow: Flow) -> None:
    """The balanced selection from the classified pool (which stays in the flow: routing draws top-ups from it)."""
    chosen = run.call(SPEC, flow.queries, run.cfg.scenarios, str(run.paths.run / P.SELECTED_QUERIES)).value.records
    take_selection(run, flow, chosen)
    run.log.info("selected %d of %d queries: %s", len(chosen.selected), len(flow.queries), goal_counts(chosen.selected))


SPEC = StageSpec(
    "select",
    select_batch,
    config="select",
    cached=False,
    listed=False,
    at=Position.POOL,
    runs_with="gather",
    on_run=select_from_pool,
)
