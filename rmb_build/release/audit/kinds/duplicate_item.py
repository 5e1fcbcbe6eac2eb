"""``duplicate_item``: an exact copy of an earlier item of the same set."""

from __future__ import annotations

import json

from rmb_build.core.items import Item, PairwiseItem
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry
from rmb_build.release.audit.packed import Records, digest, runs


def raw_key(item: Item) -> bytes:
    conv = [[t.role, t.content] for t in item.conversation]
    if isinstance(item, PairwiseItem):
        key = [item.set_name, conv, item.chosen.answer, item.rejected.answer]
    else:
        key = [item.set_name, conv, item.best.answer, sorted(a.answer for a in item.losers)]
    return digest(json.dumps(key, ensure_ascii=False))


@defect(
    "duplicate_item",
    """an item equal to an earlier item of the same set, in any of its files: the
         same turns' role and content and the same answer strings, compared as stored (chosen and rejected
         in place; or best and the multiset of losers). One entry per extra copy; ``first`` names the copy
         that is kept. Copies that differ only in whitespace are not duplicates.""",
    rank=20,
)
class _Duplicates:
    def __init__(self, ctx: AuditContext):
        self.items = ctx.items
        self.keys = Records(("key", "16s"), ("order", "I"))

    def add(self, e: Entry) -> None:
        self.keys.append(raw_key(e.item), e.at.order)

    def finish(self) -> list[dict]:
        copies = []  # (copy, first), every extra copy
        for run in runs(self.keys.array(), ["key"], min_size=2):
            first, *later = run["order"].tolist()
            copies += [(order, first) for order in later]
        out = []
        for order, first in sorted(copies):
            f = self.items.at(first)
            out.append(
                defect_entry(
                    self.items.at(order), f"same conversation and answers as uid {f.uid} in {f.file}", first=f.ref()
                )
            )
        return out
