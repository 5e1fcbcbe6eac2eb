"""``unknown_scenario``: an item in a file whose scenario is not one of RMB's 49."""

from __future__ import annotations

from rmb_build.core.taxonomy import is_known
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry


@defect("unknown_scenario", "an item in a file whose scenario id is not one of RMB's 49.", rank=100)
def _unknown_scenario(ctx: AuditContext, e: Entry) -> dict | None:
    return (
        None
        if is_known(e.item.scenario_id)
        else defect_entry(e, f"scenario {e.item.scenario_id!r} is not one of RMB's 49")
    )
