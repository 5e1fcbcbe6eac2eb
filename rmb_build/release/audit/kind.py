"""A defect kind: its declaration on the registry (``KINDS``), what its check gets (``AuditContext``, one
``Entry`` an item) and what it gives (``defect_entry``), and its fixer (``removes``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from rmb_build.core.items import Item, PairwiseItem
from rmb_build.core.registry import Registry
from rmb_build.release.audit.packed import Items, Ref
from rmb_build.release.style_set import StyleRecord

TEXT_MEMO = 256  # identity texts remembered while walking (neighbouring items share texts)


@dataclass
class AuditContext:
    """What a check gets: the audit's options, and where to leave notes and figures."""

    leak_patterns: Sequence[re.Pattern]
    near_duplicates: bool
    near_threshold: float
    notes: list[str]
    checks: dict[str, Any]
    embed: Callable[[Sequence[str]], Any] | None = None  # texts -> unit rows; None: the default encoder
    items: "Items" = field(default_factory=lambda: Items())  # every item added so far, by order
    review: Mapping[tuple[str, str], dict] | None = None  # people's verdicts (review_labels.human_verdicts)
    style: Sequence[StyleRecord] = ()  # Style_set/'s records (release/style_set.py), checked after the items


def named_item(entry: dict) -> list[dict]:
    return [entry]


def no_item(entry: dict) -> list[dict]:
    return []


class Collector(Protocol):
    """A kind that compares items: fed every item in release order (``add``), it keeps only digests
    and item numbers (``Records``), then lists its entries (``finish``; ``ctx.items.at`` turns an
    item number back into its ``Ref``)."""

    def __init__(self, ctx: AuditContext) -> None: ...

    def add(self, e: "Entry") -> None: ...

    def finish(self) -> list[dict]: ...


ItemCheck = Callable[[AuditContext, "Entry"], "dict | None"]


@dataclass(frozen=True)
class DefectKind:
    """One kind of defect: its name, its definition, how it is found, its place in report order
    (``rank``: lower first) and its fixer (``removes``: the items a defect entry makes unusable).
    ``check`` is either a per-item check (context, entry -> the entry's defect or None) or a collector
    class (``Collector``, built with the context)."""

    name: str
    definition: str
    check: ItemCheck | type[Collector]
    rank: int
    removes: Callable[[dict], list[dict]] = named_item
    renumbers: bool = False  # the fix gives the named item its entry's ``new_uid`` instead of removing it

    def collector(self, ctx: AuditContext) -> Collector:
        if isinstance(self.check, type):
            return self.check(ctx)
        return PerItem(ctx, self.check)


# every module of audit/kinds/ declares one kind; imported on the first lookup
KINDS: Registry[DefectKind] = Registry("defect kind", "rmb_build.release.audit.kinds")


def defect(
    name: str,
    definition: str,
    removes: Callable[[dict], list[dict]] = named_item,
    renumbers: bool = False,
    *,
    rank: int,
):
    """Declare the per-item check function or the collector class below as defect kind ``name`` on
    ``KINDS``; ``rank`` is its place in report order (lower first; no two kinds share one).
    ``renumbers``: the fix renumbers the named item (its entry's ``new_uid``) and removes nothing."""

    def register(check):
        kind = DefectKind(name, " ".join(definition.split()), check, rank, no_item if renumbers else removes, renumbers)
        KINDS.add(name, kind)
        return check

    return register


def in_report_order() -> list[DefectKind]:
    """Every declared kind, by rank (the one place report order is decided)."""
    kinds = sorted((k for _, k in KINDS.items()), key=lambda k: k.rank)
    for a, b in zip(kinds, kinds[1:]):
        if a.rank == b.rank:
            raise ValueError(f"defect kinds {a.name!r} and {b.name!r} share rank {a.rank}")
    return kinds


def kind_names() -> tuple[str, ...]:
    """Every defect kind's name, in report order."""
    return tuple(k.name for k in in_report_order())


def definitions() -> dict[str, str]:
    """Each defect kind's definition, in report order."""
    return {k.name: k.definition for k in in_report_order()}


@dataclass(frozen=True, slots=True)
class Entry:
    """The item being audited with its identity texts: ``conv`` the conversation, ``answers`` in
    ``item.answers()`` order, ``texts`` (RMB field, text); ``conv_key``/``answer_keys`` their digests."""

    item: Item
    at: Ref
    conv: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]
    texts: tuple[tuple[str, str], ...]
    conv_key: bytes
    answer_keys: tuple[bytes, ...]


def answer_fields(item: Item) -> list[str]:
    if isinstance(item, PairwiseItem):
        return ["chosen.answer", "reject.answer"]
    return ["bon_best.answer", *(f"loser_list[{i}].answer" for i in range(len(item.losers)))]


def defect_entry(e: Entry | Ref, detail: str, **extra: object) -> dict[str, Any]:
    at = e.at if isinstance(e, Entry) else e
    return {**at.ref(), "detail": detail, **extra}


class PerItem:
    """The collector of a per-item check: its entries in release order."""

    def __init__(self, ctx: AuditContext, check: ItemCheck):
        self.ctx, self.check = ctx, check
        self.out: list[dict] = []

    def add(self, e: Entry) -> None:
        found = self.check(self.ctx, e)
        if found is not None:
            self.out.append(found)

    def finish(self) -> list[dict]:
        return self.out


def removal_refs(kind: str, entry: dict) -> list[dict]:
    """The items a defect makes unusable, by its kind's fixer (a kind this version does not know
    removes the item it names)."""
    return KINDS.get(kind).removes(entry) if kind in KINDS else named_item(entry)
