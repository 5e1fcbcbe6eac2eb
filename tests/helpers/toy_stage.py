"""A toy build stage, added through CONTRIBUTING's recipe ("Adding a stage"): this one file, and one line
in ``rmb_build/pipeline/stages.py`` (the test puts it there). It signs every generated answer, over each
batch's answers after ``generate``, so the judge, the guard and the sets see the signed answers."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from rmb_build.core.records import Query, Response
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

SIGNATURE = " (signed)"


async def sign_batch(
    env: StageEnv, queries: Sequence[Query], answers: Sequence[Response]
) -> StageResult[list[Response]]:
    signed = [dataclasses.replace(a, text=a.text + SIGNATURE) for a in answers]
    return StageResult(records=signed, stats={"signed": len(signed)})


SPEC = StageSpec("sign", sign_batch, config="generators", at=Position.ANSWERS, optional=True, counts="answers")
