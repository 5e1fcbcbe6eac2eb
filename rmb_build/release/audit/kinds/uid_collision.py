"""``uid_collision``: an item whose uid an earlier item of its set has, with other texts (``--fix`` renumbers it)."""

from __future__ import annotations

from collections import defaultdict

from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry
from rmb_build.release.audit.kinds.duplicate_item import raw_key
from rmb_build.release.audit.packed import Items, Records, digest, runs


@defect(
    "uid_collision",
    """an item whose uid an earlier item of the same set already has, with other texts (an item
         with the same texts too is a ``duplicate_item``). Labels, annotations and predictions name an item by
         (set, uid), so one uid must mean one item. One entry per later item; ``first`` names the item that
         keeps the uid, ``new_uid`` the uid ``--fix`` gives this one (after the set's largest number, or the
         uid with a ``-2``, ``-3``, ... suffix where the set's uids are not all numbers); nothing is removed.""",
    renumbers=True,
    rank=30,
)
class _UidCollisions:
    def __init__(self, ctx: AuditContext):
        self.items = ctx.items
        self.keys = Records(("uid", "16s"), ("key", "16s"), ("order", "I"))

    def add(self, e: Entry) -> None:
        self.keys.append(digest(f"{e.item.set_name}\0{e.item.uid}"), raw_key(e.item), e.at.order)

    def finish(self) -> list[dict]:
        records = self.keys.array()
        copies = {o for run in runs(records, ["key"], min_size=2) for o in run["order"].tolist()[1:]}
        found = []  # (later item, first item): the later one is no copy of an earlier item
        for run in runs(records, ["uid"], min_size=2):
            first, *later = run["order"].tolist()
            found += [(order, first) for order in later if order not in copies]
        if not found:
            return []
        fresh = _FreshUids(self.items)
        out = []
        for order, first in sorted(found):
            at, f = self.items.at(order), self.items.at(first)
            new_uid = fresh.next(at.set, at.uid)
            out.append(
                defect_entry(
                    at,
                    f"uid {at.uid} is also item {f.index} of {f.file}, with other texts; --fix numbers this one {new_uid}",
                    first=f.ref(),
                    new_uid=new_uid,
                )
            )
        return out


class _FreshUids:
    """Uids no item of a set has: after the set's largest number where all its uids are numbers,
    else the colliding uid with the first free ``-2``, ``-3``, ... suffix."""

    def __init__(self, items: "Items"):
        self.taken: dict[str, set[str]] = defaultdict(set)
        for order in range(len(items)):
            ref = items.at(order)
            self.taken[ref.set].add(ref.uid)
        self.top = {
            s: max(int(u) for u in uids) if all(u.isascii() and u.isdigit() for u in uids) else None
            for s, uids in self.taken.items()
        }

    def next(self, set_name: str, uid: str) -> str:
        top = self.top[set_name]
        if top is not None:
            self.top[set_name] = top + 1
            new = str(top + 1)
        else:
            k = 2
            while f"{uid}-{k}" in self.taken[set_name]:
                k += 1
            new = f"{uid}-{k}"
        self.taken[set_name].add(new)
        return new
