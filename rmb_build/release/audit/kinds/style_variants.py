"""``style_variants``: a Style_set record without three variants a side, or in the wrong scenario file."""

from __future__ import annotations

from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import STYLES, StyleRecord


@defect(
    "style_variants",
    f"a Style_set record without exactly {len(STYLES)} chosen and {len(STYLES)} rejected variants "
    f"({', '.join(STYLES)}), or whose scenario field differs from its file's.",
    no_item,
    rank=150,
)
class _StyleVariants(StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        wrong = [f"{side} has {len(v)}" for side, v in (("chosen", rec.chosen), ("rejected", rec.rejected))]
        wrong = [w for w, v in zip(wrong, (rec.chosen, rec.rejected)) if len(v) != len(STYLES)]
        if rec.scenario != rec.scenario_id:
            wrong.append(f"scenario {rec.scenario!r} in file of {rec.scenario_id!r}")
        return style_defect(rec, "; ".join(wrong)) if wrong else None
