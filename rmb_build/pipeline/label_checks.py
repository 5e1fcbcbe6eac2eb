"""Label checks that run after selection and before generation: the judge against gold labels
(``rmb_build.stages.gold``) and goal routing by the guard (``rmb_build.stages.route``).

Routing cost: with ``route.scope: selected`` (default) only the selected queries' prompts are
guarded (one short call each); queries routed away are replaced by drawing from the rest of the
classified pool (guarded and routed in turn, ``route.top_up_rounds`` times at most), so a build
spends about one guard call per selected query instead of one per gathered prompt. ``scope: pool`` guards every
classified prompt first and selects from the routed pool (balance exactly as configured; cost grows
with the pool).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.records import Query
from rmb_build.core.taxonomy import GOALS
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.context import BuildRun
from rmb_build.release import gold_report
from rmb_build.stages import gold as gold_stage
from rmb_build.stages import route as route_stage
from rmb_build.stages.classify import build_classifier
from rmb_build.stages.gold import below, guard_evidence
from rmb_build.stages.guard import guard
from rmb_build.stages.route import Routing, alternatives_from, goal_of, needs_alternatives, route
from rmb_build.stages.select import select, select_balanced
from rmb_build.stages.spec import open_store


async def check_gold(run: BuildRun) -> dict | None:
    """The gold section (None without ``judge.gold``); raises RMBError (one line) below
    ``--min-gold-agreement``. A dry run plans it: the section (for routing) and nothing recorded."""
    cfg, min_agreement = run.cfg, run.options.min_gold_agreement
    if cfg.judge.gold is None:
        if min_agreement is not None:
            raise RMBError("--min-gold-agreement needs judge.gold in the build config")
        return None
    section, failures = (await run.once(gold_stage.SPEC, cfg.guard)).value
    if run.planning:  # its replies may be stand-ins: no figure of it is printed or checked
        return section
    state = run.state
    state.add_failures(failures)
    state.stage(gold_stage.SPEC.name).stats = {k: v for k, v in section.items() if k != "stats"}
    state.flush(gold=section)
    run.log.info(
        "%s: the judge against %s's labels:\n%s",
        gold_stage.SPEC.name,
        section.get("release"),
        gold_report.table(section),
    )
    stop = below(section, min_agreement) if min_agreement is not None else None
    if stop:
        raise RMBError(stop)
    return section


async def _guard_and_route(
    cfg: BuildConfig, queries: Sequence[Query], client: Any, store_dir: str | None, not_evidence: str | None
) -> tuple[Routing, list[Any]]:
    """The routing of ``queries`` by their prompts' guard verdicts, and the guard's failures."""
    labels = await guard(queries, [], cfg.guard, client, every_prompt=True)
    unsure = needs_alternatives(queries, labels.records, not_evidence)
    alts = {}
    if unsure:  # the build's encoder and store: the same vectors classify saw, none encoded twice
        store = open_store(cfg.embeddings, store_dir) if store_dir else None
        alts = alternatives_from(build_classifier(cfg.classifier.train_release, cfg.embeddings, store), unsure)
    routed = route(queries, labels.records, alts, cfg.route.safe_harmful, not_evidence)
    if cfg.scenarios is not None:  # routing may move a query out of the scenarios the build is limited to
        kept = [q for q in routed.kept if q.scenario_id in cfg.scenarios]
        routed.dropped["routed to a scenario not in the config's 'scenarios'"] += len(routed.kept) - len(kept)
        routed.kept = kept
    return routed, list(labels.failures)


def _pool(queries: Sequence[Query], cfg: BuildConfig) -> list[Query]:
    return [q for q in queries if q.scenario_id and (cfg.scenarios is None or q.scenario_id in cfg.scenarios)]


@dataclass
class Routed:
    """What goal routing decided: the selected queries after it, the updated "not selected" reasons,
    the routing itself (decisions per query, for the annotations), the guard's failures, and how many
    pool queries top-up rounds could still draw (``top_up_room``: a dry run's bound where it cannot know
    the verdicts)."""

    selected: list[Query]
    not_selected: dict[str, int]
    routing: Routing
    failures: list[Any] = field(default_factory=list)
    top_up_room: int = 0


async def _routed(
    cfg: BuildConfig,
    queries: Sequence[Query],
    selected: list[Query],
    not_selected: dict[str, int],
    client: Any,
    store_dir: str | None = None,
    gold: dict | None = None,
) -> Routed:
    """Selected queries routed by their prompts' guard verdicts (see the module docstring)."""
    failures: list[Any] = []
    not_evidence = guard_evidence(gold, cfg.route.min_guard_precision)
    if cfg.route.scope == "pool":
        pool = _pool(queries, cfg)
        routing, failed = await _guard_and_route(cfg, pool, client, store_dir, not_evidence)
        failures += failed
        in_pool = {q.id for q in pool}
        others = [q for q in queries if q.id not in in_pool]
        selected, not_selected = select([*others, *routing.kept], cfg.select, cfg.scenarios)
        room = 0
    else:
        routing, failed = await _guard_and_route(cfg, selected, client, store_dir, not_evidence)
        failures += failed
        considered = {q.id for q in selected}
        want = {
            g: min(cfg.select.min_per_goal, n) for g, n in Counter(goal_of(q.scenario_id) for q in selected).items()
        }
        for _ in range(cfg.route.top_up_rounds):
            have = Counter(goal_of(q.scenario_id) for q in routing.kept)
            short = {g: max(0, want.get(g, 0) - have[g]) for g in GOALS}
            total = max(len(selected) - len(routing.kept), sum(short.values()))
            rest = [q for q in _pool(queries, cfg) if q.id not in considered]
            if total <= 0 or not rest:
                break
            draw = select_balanced(
                rest, total=total, min_per_goal=short, per_scenario=cfg.select.per_scenario, seed=cfg.select.seed
            )
            if not draw:
                break
            considered.update(q.id for q in draw)
            more, failed = await _guard_and_route(cfg, draw, client, store_dir, not_evidence)
            routing.extend(more)
            failures += failed
        not_selected = _moved_to_considered(not_selected, len(considered) - len(selected))
        room = sum(1 for q in _pool(queries, cfg) if q.id not in considered) if cfg.route.top_up_rounds else 0
        selected = routing.kept
    for reason, n in routing.dropped.items():
        not_selected[f"routing: {reason}"] = not_selected.get(f"routing: {reason}", 0) + n
    return Routed(selected, not_selected, routing, failures, room)


async def route_by_guard(run: BuildRun, queries: Sequence[Query], selected: list[Query], gold: dict | None) -> Routed:
    """``selected`` routed by their prompts' guard verdicts, from the classified ``queries``; ``gold``: the
    gold check's section, whose guard precision says whether an ``unsafe`` verdict is evidence. Its
    failures and stats go to the run state and the log (not in a dry run: its verdicts may be stand-ins)."""
    with run.in_flow(route_stage.SPEC) as client:
        routed = await _routed(
            run.cfg, queries, selected, dict(run.acc.not_selected), client, str(run.paths.embeddings), gold
        )
    if run.planning:
        return routed
    state = run.state
    state.add_failures(routed.failures)
    stats = routed.routing.stats()
    state.stage(route_stage.SPEC.name).stats = stats
    state.flush()
    run.log.info(
        "%s: %d prompts guarded; goal from guard %s; changed %s; dropped %s; unsafe verdicts not taken: %s",
        route_stage.SPEC.name,
        stats["guarded"],
        stats["goal_from"].get("guard", 0),
        stats["changed"] or "none",
        stats["dropped"] or "none",
        stats["unsafe_not_evidence"] or "none",
    )
    return routed


def _moved_to_considered(not_selected: dict[str, int], topped_up: int) -> dict[str, int]:
    """``not_selected`` with ``topped_up`` queries taken out of the balanced-subset bucket (they were drawn)."""
    out = dict(not_selected)
    for key in out:
        if key.startswith("not selected") and topped_up:
            out[key] -= topped_up
            if not out[key]:
                del out[key]
            break
    return out
