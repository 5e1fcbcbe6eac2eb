"""Every stage's work returns one type, ``StageResult`` (what it produced, its failures, its counts), and the one
place that runs a stage's work (``pipeline/executor.py``) refuses any other result, naming the stage."""

from __future__ import annotations

import asyncio
import inspect
import re

import pytest

from rmb_build.core.records import Query
from rmb_build.pipeline.executor import acompute, compute
from rmb_build.pipeline.stages import STAGES
from rmb_build.stages.spec import StageEnv, StageResult, StageSpec


def _bare_list(env: StageEnv, queries: list[Query]) -> list[Query]:
    return list(queries)


async def _bare_tuple(env: StageEnv, queries: list[Query]) -> tuple[list[Query], dict]:
    return list(queries), {}


@pytest.mark.parametrize("work", [_bare_list, _bare_tuple])
def test_a_work_that_returns_anything_but_a_stage_result_is_refused_naming_its_stage(work):
    spec = StageSpec("loose", work)
    with pytest.raises(TypeError) as caught:
        if asyncio.iscoroutinefunction(work):
            asyncio.run(acompute(spec, StageEnv(None), [[]]))
        else:
            compute(spec, StageEnv(None), [[]])
    assert str(caught.value) == f"stage 'loose': its work returned a {work.__name__[6:]}, not a StageResult"


def test_a_stage_result_comes_back_as_it_was_made():
    made = StageResult(["q"], stats={"n": 1})
    assert compute(StageSpec("tidy", lambda env, qs: made), StageEnv(None), [[]]).value is made


@pytest.mark.parametrize("spec", [s for s in STAGES if s.work is not None], ids=lambda s: s.name)
def test_every_stage_of_the_build_says_its_work_returns_a_stage_result(spec):
    """Its annotation (mypy holds the work to it, ``StageSpec.work``'s type)."""
    returns = inspect.signature(spec.work).return_annotation  # a string: the modules' annotations are postponed
    assert re.fullmatch(r"StageResult\[.+\]", returns), f"{spec.name}: {returns}"
