"""``unwinnable_bon``: a BoN item whose best answer is one of its losers."""

from __future__ import annotations

from rmb_build.core.items import BonItem
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry


@defect("unwinnable_bon", "a BoN item whose best answer is the same text as one of its losers.", rank=40)
def _unwinnable(ctx: AuditContext, e: Entry) -> dict | None:
    if isinstance(e.item, BonItem):
        hits = [i for i, a in enumerate(e.answers[1:]) if a == e.answers[0]]
        if hits:
            return defect_entry(
                e,
                f"best answer equals loser_list[{hits[0]}] after normalisation",
                losers=hits,
                field=f"loser_list[{hits[0]}].answer",
            )
    return None
