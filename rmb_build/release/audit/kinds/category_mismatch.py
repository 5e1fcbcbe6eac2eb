"""``category_mismatch``: an item whose ``category_path`` is not its file's."""

from __future__ import annotations

from rmb_build.core.items import default_category_path
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry


@defect(
    "category_mismatch",
    """``category_path`` (exactly as stored) differs from the item's file path
         relative to the release root without ``.json``.""",
    rank=80,
)
def _category_mismatch(ctx: AuditContext, e: Entry) -> dict | None:
    expected = default_category_path(e.item.set_name, e.item.scenario_id)
    if e.item.category_path == expected:
        return None
    got = repr(e.item.category_path) if e.item.category_path else "missing"
    return defect_entry(
        e,
        f"category_path is {got}, but the item's file is {expected!r}",
        field="category_path",
        category_path=e.item.category_path,
        expected=expected,
    )
