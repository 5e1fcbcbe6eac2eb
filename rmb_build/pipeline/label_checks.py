"""Label checks that run after selection and before generation, each a stage through the runner step:
the judge against gold labels (``rmb_build.stages.gold``) and goal routing by the guard
(``rmb_build.stages.route``). Here: what the run keeps of them (failures, stats, the log, the
``--min-gold-agreement`` stop).
"""

from __future__ import annotations

from typing import Sequence

from rmb_build.core import paths as P
from rmb_build.core.errors import RMBError
from rmb_build.core.records import Query
from rmb_build.pipeline.context import BuildRun
from rmb_build.release import gold_report
from rmb_build.stages import gold as gold_stage
from rmb_build.stages import route as route_stage
from rmb_build.stages.gold import below


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


async def route_by_guard(
    run: BuildRun, queries: Sequence[Query], selected: list[Query], gold: dict | None
) -> route_stage.Routed:
    """``selected`` routed by their prompts' guard verdicts, from the classified ``queries``; ``gold``: the
    gold check's section, whose guard precision says whether an ``unsafe`` verdict is evidence. Its
    failures and stats go to the run state and the log (not in a dry run: its verdicts may be stand-ins)."""
    settings = route_stage.Settings.of(run.cfg, str(run.paths.run / P.SELECTED_QUERIES))
    routed = (await run.once(route_stage.SPEC, settings, queries, selected, dict(run.acc.not_selected), gold)).value
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
    if stats["stopped"]:
        run.log.warning("%s: %s", route_stage.SPEC.name, stats["stopped"])
    return routed
