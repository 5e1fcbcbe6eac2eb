"""A toy stage on queries (``Position.QUERIES``): one file and one line in ``rmb_build/pipeline/stages.py``
(the test puts it there). In each batch's chain before ``generate`` it marks every query's last turn, so the
generators answer, and the release holds, the marked queries."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from rmb_build.core.records import Query
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

MARK = " (marked)"
SEEN: list[int] = []  # the batch sizes its work saw in this process (a dry run's plan included)


def mark_batch(env: StageEnv, queries: Sequence[Query]) -> StageResult[list[Query]]:
    SEEN.append(len(queries))
    marked = [
        dataclasses.replace(
            q,
            conversation=(
                *q.conversation[:-1],
                dataclasses.replace(q.conversation[-1], content=q.conversation[-1].content + MARK),
            ),
        )
        for q in queries
    ]
    return StageResult(records=marked, stats={"marked": len(marked)})


SPEC = StageSpec("mark", mark_batch, at=Position.QUERIES, optional=True, cached=False)
