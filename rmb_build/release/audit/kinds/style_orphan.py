"""``style_orphan``: a Style_set record naming no pairwise item."""

from __future__ import annotations

from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import StyleRecord


@defect(
    "style_orphan", "a Style_set record whose id is the pair_uid of no pairwise item of the release.", no_item, rank=140
)
class _StyleOrphan(StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        return None if rec.id in self.pairwise else style_defect(rec, f"no pairwise item has pair_uid {rec.id!r}")
