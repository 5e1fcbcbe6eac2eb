"""``style_repeated_id``: a Style_set record whose id repeats an earlier record's (of the same set)."""

from __future__ import annotations

from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import StyleRecord


@defect(
    "style_repeated_id",
    "a Style_set record whose id (and set) repeats an earlier record's: two variants of one item, of which "
    "'rmb evaluate' refuses the release.",
    no_item,
    rank=145,
)
class _StyleRepeatedId(StyleCheck):
    def finish(self) -> list[dict]:
        self.first: dict[tuple[str, str], StyleRecord] = {}
        return super().finish()

    def check(self, rec: StyleRecord) -> dict | None:
        first = self.first.setdefault((rec.set_name, rec.id), rec)
        return None if first is rec else style_defect(rec, f"repeats the id of {first.where()}")
