"""``identical_pair``: a pairwise item whose chosen and rejected answers are one text."""

from __future__ import annotations

from rmb_build.core.items import PairwiseItem
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry


@defect("identical_pair", "a pairwise item whose chosen and rejected answers are the same text.", rank=10)
def _identical_pair(ctx: AuditContext, e: Entry) -> dict | None:
    if isinstance(e.item, PairwiseItem) and e.answers[0] == e.answers[1]:
        return defect_entry(
            e,
            "chosen and rejected answers are equal after normalisation",
            chosen_model=e.item.chosen.llm_name,
            rejected_model=e.item.rejected.llm_name,
        )
    return None
