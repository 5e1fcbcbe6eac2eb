"""``empty_text``: an item with an empty turn or answer."""

from __future__ import annotations

from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry


@defect("empty_text", "an item with a turn or an answer that is empty by the identity rule (whitespace only).", rank=70)
def _empty_text(ctx: AuditContext, e: Entry) -> dict | None:
    fields = [name for name, text in e.texts if not text]
    return (
        defect_entry(e, f"empty or whitespace-only: {', '.join(fields)}", fields=fields, field=fields[0])
        if fields
        else None
    )
