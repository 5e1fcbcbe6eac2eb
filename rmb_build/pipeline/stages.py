"""The build's stages, in the order they run: the one list the build, the dry run, the config's
``stages:``, preflight and the Prefect tasks read. Adding a stage: its module in ``rmb_build/stages/``
ending with ``SPEC = StageSpec(...)`` that says where it runs (``at``: a ``Position``; the build runs the
stages at each position in this list's order), and one line here."""

from __future__ import annotations

from rmb_build.stages import (
    classify,
    dedup,
    embed,
    gather,
    generate,
    gold,
    guard,
    harm_evidence,
    judge,
    release,
    route,
    select,
    sets,
    style,
)
from rmb_build.stages.spec import Position, StageSpec

STAGES: tuple[StageSpec, ...] = (
    gather.SPEC,
    embed.SPEC,
    dedup.SPEC,
    classify.SPEC,
    classify.LLM_SPEC,
    harm_evidence.SPEC,
    select.SPEC,
    gold.SPEC,
    route.SPEC,
    generate.SPEC,
    judge.SPEC,
    guard.SPEC,
    sets.SPEC,
    style.SPEC,
    release.SPEC,
)


def listed() -> tuple[str, ...]:
    """The names the config's ``stages:`` accepts, in build order."""
    return tuple(s.name for s in STAGES if s.listed)


def at(position: Position) -> tuple[StageSpec, ...]:
    """The stages that run at ``position``, in build order."""
    return tuple(s for s in STAGES if s.at is position)
