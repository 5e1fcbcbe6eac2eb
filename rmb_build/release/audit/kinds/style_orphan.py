"""``style_orphan``: a Style_set record naming no item of its set (or a BoN loser that item lacks)."""

from __future__ import annotations

from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import StyleRecord, orphan_reason


@defect(
    "style_orphan",
    "a Style_set record whose id is the pair_uid of no pairwise item of the release (a BoN record's: the bon_uid "
    "of no BoN item, or its loser not in that item's loser_list).",
    no_item,
    rank=140,
)
class _StyleOrphan(StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        reason = orphan_reason(rec, self.uids)
        return style_defect(rec, reason) if reason is not None else None
