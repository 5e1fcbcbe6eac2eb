"""``style_unknown_scenario``: a Style_set record in a file whose scenario id is not one of RMB's 49."""

from __future__ import annotations

from rmb_build.core.taxonomy import is_known
from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import StyleRecord


@defect(
    "style_unknown_scenario",
    "a Style_set record in a file whose scenario id is not one of RMB's 49, of which 'rmb evaluate' refuses "
    "the release.",
    no_item,
    rank=135,
)
class _StyleUnknownScenario(StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        if is_known(rec.scenario_id):
            return None
        return style_defect(rec, f"file of unknown scenario {rec.scenario_id!r}: not one of RMB's 49")
