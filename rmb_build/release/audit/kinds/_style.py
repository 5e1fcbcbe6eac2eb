"""What the kinds checking ``Style_set/``'s records share."""

from __future__ import annotations

from typing import Any

from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.release.audit.kind import AuditContext, Entry
from rmb_build.release.style_set import STYLE_SET, StyleRecord


def style_defect(rec: StyleRecord, detail: str) -> dict[str, Any]:
    return {"set": STYLE_SET, "uid": rec.id, "file": rec.file, "index": rec.index, "detail": detail}


class StyleCheck:
    """A check of ``Style_set/``'s records (``ctx.style``), run once every item has been seen."""

    def __init__(self, ctx: AuditContext):
        self.ctx = ctx
        self.uids: dict[str, dict[str, int]] = {PAIRWISE_SET: {}, BON_SET: {}}  # per set, uid: its loser count

    def add(self, e: Entry) -> None:
        self.uids[e.item.set_name][str(e.item.uid)] = len(getattr(e.item, "losers", ()))

    def finish(self) -> list[dict]:
        return [d for rec in self.ctx.style if (d := self.check(rec)) is not None]

    def check(self, rec: StyleRecord) -> dict | None:
        raise NotImplementedError
