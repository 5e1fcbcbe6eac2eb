"""A toy stage on items (``Position.ITEMS``): one file and one line in ``rmb_build/pipeline/stages.py``
(the test puts it there). In each batch's chain after ``build_sets`` it tallies the batch's items; its
records are kept beside the batch's sets."""

from __future__ import annotations

from typing import Any, Sequence

from rmb_build.core.records import Query
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

SEEN: list[int] = []  # the item counts its work saw in this process (a dry run's plan included)


def tally_batch(env: StageEnv, queries: Sequence[Query], built: Any) -> StageResult[list[dict[str, Any]]]:
    uids = [{"set": it.set_name, "uid": it.uid} for it in [*built.pairwise, *built.bon]]
    SEEN.append(len(uids))
    return StageResult(records=uids, stats={"tallied": len(uids)})


SPEC = StageSpec("tally", tally_batch, at=Position.ITEMS, optional=True, cached=False, counts="items")
