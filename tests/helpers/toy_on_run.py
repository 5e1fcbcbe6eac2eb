"""A toy stage over the whole run (``Position.RUN``): one file and one line in ``rmb_build/pipeline/stages.py``
(the test puts it there). Once, over the selected queries before their batches, it counts them and hands
them on."""

from __future__ import annotations

from typing import Sequence

from rmb_build.core.records import Query
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

SEEN: list[int] = []  # the query counts its work saw in this process (a dry run's plan included)


def count_run(env: StageEnv, queries: Sequence[Query]) -> StageResult[list[Query]]:
    SEEN.append(len(queries))
    return StageResult(records=list(queries), stats={"counted": len(queries)})


SPEC = StageSpec("count_run", count_run, at=Position.RUN, optional=True, cached=False)
