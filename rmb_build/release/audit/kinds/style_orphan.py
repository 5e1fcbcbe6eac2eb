"""``style_orphan``: a Style_set record naming no item of its set (or a BoN loser that item lacks)."""

from __future__ import annotations

from rmb_build.core.taxonomy import PAIRWISE_SET
from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import StyleRecord


@defect(
    "style_orphan",
    "a Style_set record whose id is the pair_uid of no pairwise item of the release (a BoN record's: the bon_uid "
    "of no BoN item, or its loser not in that item's loser_list).",
    no_item,
    rank=140,
)
class _StyleOrphan(StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        losers = self.uids[rec.set_name].get(rec.id)
        if losers is None:
            uid = "pair_uid" if rec.set_name == PAIRWISE_SET else "bon_uid"
            return style_defect(rec, f"no {rec.set_name} item has {uid} {rec.id!r}")
        if rec.loser is not None and rec.loser >= losers:
            return style_defect(rec, f"bon item {rec.id!r} has {losers} losers, no loser_list[{rec.loser}]")
        return None
