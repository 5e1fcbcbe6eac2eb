"""Audit a release: find every defect of each declared kind, report them, write a cleaned copy.

A defect kind is one ``@defect(name, definition)`` declaration (below, in report order) on its
per-item check function, or on its collector class where it compares items; ``removes`` names its
fixer (which items ``fix_release`` takes out: the named item unless said otherwise). Adding a kind
is one more declaration: ``DEFECT_KINDS``, the report's counts (every kind, 0 when none was found),
the card's table and ``definitions()`` follow.

The audit streams (``StreamingAudit``): items come one at a time, and what outlives an item is
packed into flat buffers (``_Items``: where it lives; ``_Records``: the 16-byte digests of its texts
a comparing kind needs), not kept as Python objects; comparing kinds sort those records when the
last item is in.

Texts are compared by ``rmb_build.core.text.identity`` (NFKC, case folded, whitespace collapsed), the
same rule ``build_sets`` merges equal answers by, except for ``duplicate_item`` (exact copies, as
stored); ``llm_name`` and a turn's ``language`` never count. A conversation is its turns'
(role, identity(content)) in order. Each entry has ``set``, ``uid``, ``file``, ``index`` (position
in the file), ``scenario``, ``detail``, and kind-specific fields.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
import struct
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from graphlib import CycleError, TopologicalSorter
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.items import BonItem, Item, PairwiseItem, Turn, default_category_path, set_file
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, is_known
from rmb_build.core.text import display, identity, search_text
from rmb_build.release.read import Release
from rmb_build.release.rmb_format import VALID_ROLES
from rmb_build.release.style_set import STYLE_SET, STYLES, StyleRecord

SCHEMA_VERSION = 1
LEAK_PATTERNS_FILE = "leak_patterns.txt"
TEXT_MEMO = 256  # identity texts remembered while walking (neighbouring items share texts)
EMBED_CHUNK = 256  # conversations' search texts embedded at a time


@dataclass
class AuditContext:
    """What a check gets: the audit's options, and where to leave notes and figures."""

    leak_patterns: Sequence[re.Pattern]
    near_duplicates: bool
    near_threshold: float
    notes: list[str]
    checks: dict[str, Any]
    embed: Callable[[Sequence[str]], Any] | None = None  # texts -> unit rows; None: the default encoder
    items: "_Items" = field(default_factory=lambda: _Items())  # every item added so far, by order
    review: Mapping[tuple[str, str], dict] | None = None  # people's verdicts (review_labels.human_verdicts)
    style: Sequence[StyleRecord] = ()  # Style_set/'s records (release/style_set.py), checked after the items


def _named_item(entry: dict) -> list[dict]:
    return [entry]


def _no_item(entry: dict) -> list[dict]:
    return []


class Collector(Protocol):
    """A kind that compares items: fed every item in release order (``add``), it keeps only digests
    and item numbers (``_Records``), then lists its entries (``finish``; ``ctx.items.at`` turns an
    item number back into its ``_Ref``)."""

    def add(self, e: "_Entry") -> None: ...

    def finish(self) -> list[dict]: ...


ItemCheck = Callable[[AuditContext, "_Entry"], "dict | None"]


@dataclass(frozen=True)
class DefectKind:
    """One kind of defect: its name, its definition, how it is found and its fixer (``removes``: the
    items a defect entry makes unusable). ``check`` is either a per-item check (context, entry ->
    the entry's defect or None) or a collector class (``Collector``, built with the context)."""

    name: str
    definition: str
    check: ItemCheck | Callable[[AuditContext], Collector]
    removes: Callable[[dict], list[dict]] = _named_item
    renumbers: bool = False  # the fix gives the named item its entry's ``new_uid`` instead of removing it

    def collector(self, ctx: AuditContext) -> Collector:
        if isinstance(self.check, type):
            return self.check(ctx)
        return _PerItem(ctx, self.check)


KINDS: dict[str, DefectKind] = {}


def defect(name: str, definition: str, removes: Callable[[dict], list[dict]] = _named_item, renumbers: bool = False):
    """Declare the per-item check function or the collector class below as defect kind ``name``
    (report order: declaration order). ``renumbers``: the fix renumbers the named item (its entry's
    ``new_uid``) and removes nothing."""

    def register(check):
        if name in KINDS:
            raise ValueError(f"defect kind {name!r} declared twice")
        KINDS[name] = DefectKind(
            name, " ".join(definition.split()), check, _no_item if renumbers else removes, renumbers
        )
        return check

    return register


def definitions() -> dict[str, str]:
    """Each defect kind's definition, in report order."""
    return {k.name: k.definition for k in KINDS.values()}


@dataclass
class AuditReport:
    """Defects of one release: ``defects[kind]`` is a list of entries (dicts), every kind present."""

    release: str
    defects: dict[str, list[dict]] = field(default_factory=lambda: {k: [] for k in DEFECT_KINDS})
    notes: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        return {
            k: len(self.defects.get(k, [])) for k in (*DEFECT_KINDS, *sorted(set(self.defects) - set(DEFECT_KINDS)))
        }

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def flagged_items(self) -> set[tuple[str, str, int]]:
        """(set, file, index) of every item that ``fix_release`` would remove or renumber."""
        return {
            (r["set"], r["file"], r["index"])
            for kind, entries in self.defects.items()
            for e in entries
            for r in removal_refs(kind, e) + ([e] if kind in KINDS and KINDS[kind].renumbers else [])
        }

    def summary(self) -> dict[str, Any]:
        """What a manifest or a dataset card records: counts, total, items flagged, notes."""
        return {
            "counts": self.counts,
            "total": self.total,
            "items_flagged": len(self.flagged_items()),
            "notes": list(self.notes),
            "checks": dict(self.checks),
        }

    def to_json(self) -> dict[str, Any]:
        """The audit JSON: ``schema_version``, ``release``, ``counts`` (every kind), ``defects``, plus ``total``,
        ``items_flagged``, ``checks`` and ``notes``."""
        return {
            "schema_version": SCHEMA_VERSION,
            "release": self.release,
            "counts": self.counts,
            "total": self.total,
            "items_flagged": len(self.flagged_items()),
            "checks": self.checks,
            "notes": self.notes,
            "defects": {k: self.defects.get(k, []) for k in self.counts},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AuditReport":
        defects = {k: [] for k in DEFECT_KINDS}
        defects.update({k: list(v) for k, v in data.get("defects", {}).items()})
        return cls(
            release=data.get("release", ""),
            defects=defects,
            notes=list(data.get("notes", [])),
            checks=dict(data.get("checks", {})),
        )


# ---------------------------------------------------------------------------------------------
# Walking the release: one item at a time; what outlives an item is packed (_Items, _Records)


def digest(text: str) -> bytes:
    """16 bytes standing for ``text`` where only equality matters."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class _Ref:
    """Where an item lives (``order``: its position in the whole release); what entries name. Made
    for the item being audited and, from ``_Items``, for the items a defect names; never kept."""

    set: str
    uid: str
    file: str
    index: int
    scenario: str
    order: int

    def ref(self) -> dict[str, Any]:
        return {"set": self.set, "uid": self.uid, "file": self.file, "index": self.index, "scenario": self.scenario}


class _Items:
    """Every audited item's ``_Ref`` fields, packed: per item three array slots (file number, index,
    end of its uid) and its uid's bytes in one buffer (at 100,000 items, a few MB and no Python
    object per item)."""

    def __init__(self) -> None:
        self._files: list[tuple[str, str, str]] = []  # (file, set, scenario), by file number
        self._file_no: dict[str, int] = {}
        self._file = array("I")
        self._index = array("Q")
        self._uid_end = array("Q")
        self._uids = bytearray()

    def __len__(self) -> int:
        return len(self._file)

    def add(self, set_name: str, uid: str, file: str, index: int, scenario: str) -> _Ref:
        """Record the next item; its ``_Ref`` (``order``: the number of items recorded before it)."""
        no = self._file_no.get(file)
        if no is None:
            no = self._file_no[file] = len(self._files)
            self._files.append((file, set_name, scenario))
        order = len(self._file)
        self._file.append(no)
        self._index.append(index)
        self._uids += uid.encode("utf-8", "surrogatepass")
        self._uid_end.append(len(self._uids))
        return _Ref(set_name, uid, file, index, scenario, order)

    def at(self, order: int) -> _Ref:
        """The ``_Ref`` of item number ``order``."""
        file, set_name, scenario = self._files[self._file[order]]
        start = self._uid_end[order - 1] if order else 0
        uid = self._uids[start : self._uid_end[order]].decode("utf-8", "surrogatepass")
        return _Ref(set_name, uid, file, self._index[order], scenario, order)


class _Records:
    """Fixed-size records appended to one bytearray (``fields``: (name, struct code) pairs, ``16s``
    digests and ``I`` numbers), read back as one numpy structured array: what a comparing kind keeps
    of every item without a Python object per item."""

    _NUMPY = {"16s": "S16", "I": "<u4", "?": "?"}

    def __init__(self, *fields: tuple[str, str]):
        self._struct = struct.Struct("<" + "".join(code for _, code in fields))
        self._dtype = [(name, self._NUMPY[code]) for name, code in fields]
        self._buf = bytearray()

    def append(self, *values: Any) -> None:
        self._buf += self._struct.pack(*values)

    def array(self) -> Any:
        """The records as a numpy structured array (a view of the buffer, not a copy)."""
        import numpy as np

        return np.frombuffer(self._buf, dtype=np.dtype(self._dtype))


def _grouped(records: Any, keys: Sequence[str]) -> tuple[Any, Any]:
    """The records sorted by ``keys`` (equal keys: in the order they were appended), and the bounds of
    each group of equal keys: group ``g`` is ``sorted[bounds[g]:bounds[g + 1]]``."""
    import numpy as np

    ordered = records[np.lexsort((np.arange(len(records)), *(records[k] for k in reversed(keys))))]
    starts = np.zeros(len(ordered), dtype=bool)
    starts[:1] = True
    for key in keys:
        starts[1:] |= ordered[key][1:] != ordered[key][:-1]
    return ordered, np.append(np.flatnonzero(starts), len(ordered))


def _runs(records: Any, keys: Sequence[str], min_size: int = 1) -> Iterator[Any]:
    """The groups of ``_grouped`` with at least ``min_size`` records, one structured array each."""
    ordered, bounds = _grouped(records, keys)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if hi - lo >= min_size:
            yield ordered[lo:hi]


@dataclass(frozen=True, slots=True)
class _Entry:
    """The item being audited with its identity texts: ``conv`` the conversation, ``answers`` in
    ``item.answers()`` order, ``texts`` (RMB field, text); ``conv_key``/``answer_keys`` their digests."""

    item: Item
    at: _Ref
    conv: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]
    texts: tuple[tuple[str, str], ...]
    conv_key: bytes
    answer_keys: tuple[bytes, ...]


def _answer_fields(item: Item) -> list[str]:
    if isinstance(item, PairwiseItem):
        return ["chosen.answer", "reject.answer"]
    return ["bon_best.answer", *(f"loser_list[{i}].answer" for i in range(len(item.losers)))]


def _defect(e: _Entry | _Ref, detail: str, **extra: Any) -> dict[str, Any]:
    at = e.at if isinstance(e, _Entry) else e
    return {**at.ref(), "detail": detail, **extra}


class _PerItem:
    """The collector of a per-item check: its entries in release order."""

    def __init__(self, ctx: AuditContext, check: ItemCheck):
        self.ctx, self.check, self.out = ctx, check, []

    def add(self, e: _Entry) -> None:
        found = self.check(self.ctx, e)
        if found is not None:
            self.out.append(found)

    def finish(self) -> list[dict]:
        return self.out


# ---------------------------------------------------------------------------------------------
# The defect kinds, in report order


@defect("identical_pair", "a pairwise item whose chosen and rejected answers are the same text.")
def _identical_pair(ctx: AuditContext, e: _Entry) -> dict | None:
    if isinstance(e.item, PairwiseItem) and e.answers[0] == e.answers[1]:
        return _defect(
            e,
            "chosen and rejected answers are equal after normalisation",
            chosen_model=e.item.chosen.llm_name,
            rejected_model=e.item.rejected.llm_name,
        )
    return None


def _raw_key(item: Item) -> bytes:
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
)
class _Duplicates:
    def __init__(self, ctx: AuditContext):
        self.items = ctx.items
        self.keys = _Records(("key", "16s"), ("order", "I"))

    def add(self, e: _Entry) -> None:
        self.keys.append(_raw_key(e.item), e.at.order)

    def finish(self) -> list[dict]:
        copies = []  # (copy, first), every extra copy
        for run in _runs(self.keys.array(), ["key"], min_size=2):
            first, *later = run["order"].tolist()
            copies += [(order, first) for order in later]
        out = []
        for order, first in sorted(copies):
            f = self.items.at(first)
            out.append(
                _defect(
                    self.items.at(order), f"same conversation and answers as uid {f.uid} in {f.file}", first=f.ref()
                )
            )
        return out


@defect(
    "uid_collision",
    """an item whose uid an earlier item of the same set already has, with other texts (an item
         with the same texts too is a ``duplicate_item``). Labels, annotations and predictions name an item by
         (set, uid), so one uid must mean one item. One entry per later item; ``first`` names the item that
         keeps the uid, ``new_uid`` the uid ``--fix`` gives this one (after the set's largest number, or the
         uid with a ``-2``, ``-3``, ... suffix where the set's uids are not all numbers); nothing is removed.""",
    renumbers=True,
)
class _UidCollisions:
    def __init__(self, ctx: AuditContext):
        self.items = ctx.items
        self.keys = _Records(("uid", "16s"), ("key", "16s"), ("order", "I"))

    def add(self, e: _Entry) -> None:
        self.keys.append(digest(f"{e.item.set_name}\0{e.item.uid}"), _raw_key(e.item), e.at.order)

    def finish(self) -> list[dict]:
        records = self.keys.array()
        copies = {o for run in _runs(records, ["key"], min_size=2) for o in run["order"].tolist()[1:]}
        found = []  # (later item, first item): the later one is no copy of an earlier item
        for run in _runs(records, ["uid"], min_size=2):
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
                _defect(
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

    def __init__(self, items: "_Items"):
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


@defect("unwinnable_bon", "a BoN item whose best answer is the same text as one of its losers.")
def _unwinnable(ctx: AuditContext, e: _Entry) -> dict | None:
    if isinstance(e.item, BonItem):
        hits = [i for i, a in enumerate(e.answers[1:]) if a == e.answers[0]]
        if hits:
            return _defect(
                e,
                f"best answer equals loser_list[{hits[0]}] after normalisation",
                losers=hits,
                field=f"loser_list[{hits[0]}].answer",
            )
    return None


def _both_items(entry: dict) -> list[dict]:
    return [entry, entry["other"]]


class _Preferences:
    """What the kinds comparing preferences keep: one record an edge (conversation, preferred answer,
    dispreferred answer, item, whether the item is pairwise): chosen -> rejected for a pairwise item,
    best -> each distinct loser for a BoN item, edges between equal texts left out."""

    def __init__(self, ctx: AuditContext):
        self.items = ctx.items
        self.edges = _Records(("conv", "16s"), ("better", "16s"), ("worse", "16s"), ("order", "I"), ("pairwise", "?"))

    def add(self, e: _Entry) -> None:
        best, pairwise = e.answer_keys[0], isinstance(e.item, PairwiseItem)
        for other in dict.fromkeys(e.answer_keys[1:]):
            if other != best:
                self.edges.append(e.conv_key, best, other, e.at.order, pairwise)

    def conversations(self, min_edges: int) -> Iterator[list[tuple[bytes, bytes, int, bool]]]:
        """Each conversation's edges (better, worse, item, pairwise) in item order, where it has
        at least ``min_edges``."""
        for run in _runs(self.edges.array(), ["conv"], min_size=min_edges):
            yield list(
                zip(run["better"].tolist(), run["worse"].tolist(), run["order"].tolist(), run["pairwise"].tolist())
            )


@defect(
    "contradiction",
    """one entry per conflicting pair of items: two pairwise items on the same
         conversation, one preferring A to B and the other B to A (A != B); or a BoN item and a pairwise
         item on the same conversation where the pairwise item prefers one of the BoN item's losers to its
         best answer. The entry names the later pairwise item (or the BoN item); ``other`` the second one.
         Both items are removed.""",
    removes=_both_items,
)
class _Contradictions(_Preferences):
    def finish(self) -> list[dict]:
        at, out = self.items.at, []
        for edges in self.conversations(min_edges=2):
            prefers: dict[tuple[bytes, bytes], list[int]] = defaultdict(list)  # pairwise items only
            for better, worse, order, pairwise in edges:
                if pairwise:
                    prefers[(better, worse)].append(order)
            for better, worse, order, pairwise in edges:
                for other in prefers.get((worse, better), ()):
                    if pairwise and other > order:
                        continue  # each conflicting pair of pairwise items once, named by its later item
                    y = at(other)
                    detail = (
                        f"prefers the answer that pairwise uid {y.uid} rejects, and rejects the one it prefers"
                        if pairwise
                        else f"pairwise uid {y.uid} prefers one of this item's losers to its best answer"
                    )
                    out.append(_defect(at(order), detail, other=y.ref()))
        out.sort(
            key=lambda d: (d["set"] != PAIRWISE_SET, d["file"], d["index"], d["other"]["file"], d["other"]["index"])
        )
        return out


def _items_on_the_cycle(entry: dict) -> list[dict]:
    return list(entry.get("items") or [entry])


def _has_loop(edges: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the directed graph of ``edges`` has a cycle (of any length)."""
    graph = TopologicalSorter()
    for better, worse in edges:
        graph.add(worse, better)
    try:
        graph.prepare()
    except CycleError:
        return True
    return False


@defect(
    "cycle",
    """three or more distinct answers of one conversation preferred in a loop (A > B > C > A).
         Per conversation, a directed graph over its answers' identity texts: an edge chosen -> rejected for
         each pairwise item, best -> each loser for each BoN item (edges between equal texts left out). Each
         elementary cycle of length >= 3 (no answer repeated; rotations are the same cycle) is one entry;
         two-answer loops are ``contradiction``. The entry names the cycle's earliest item; ``items`` lists
         every item stating one of its preferences, ``answers`` the cycle's length. All of them are removed:
         no preference on the loop can be trusted.""",
    removes=_items_on_the_cycle,
)
class _Cycles(_Preferences):
    def finish(self) -> list[dict]:
        out = []
        for edges in self.conversations(min_edges=3):  # a loop of three answers needs three preferences
            conv_edges: dict[tuple[bytes, bytes], list[int]] = defaultdict(list)  # -> items stating it
            for better, worse, order, _ in edges:
                conv_edges[(better, worse)].append(order)
            # most conversations' preferences have no loop: the stdlib's check spares networkx's import
            # (~10 MB resident) where nothing needs enumerating
            if len(conv_edges) < 3 or not _has_loop(conv_edges):
                continue
            import networkx as nx

            graph = nx.DiGraph(list(conv_edges))
            for cycle in nx.simple_cycles(graph):
                if len(cycle) < 3:
                    continue
                steps = list(zip(cycle, cycle[1:] + cycle[:1]))
                items = [self.items.at(x) for x in sorted({x for step in steps for x in conv_edges[step]})]
                out.append(
                    _defect(
                        items[0],
                        f"{len(cycle)} answers preferred in a loop by "
                        f"{', '.join(f'{x.set} uid {x.uid}' for x in items)}",
                        answers=len(cycle),
                        items=[x.ref() for x in items],
                    )
                )
        out.sort(
            key=lambda d: (
                d["set"] != PAIRWISE_SET,
                d["file"],
                d["index"],
                [(r["file"], r["index"]) for r in d["items"]],
            )
        )
        return out


@defect("empty_text", "an item with a turn or an answer that is empty by the identity rule (whitespace only).")
def _empty_text(ctx: AuditContext, e: _Entry) -> dict | None:
    fields = [name for name, text in e.texts if not text]
    return (
        _defect(e, f"empty or whitespace-only: {', '.join(fields)}", fields=fields, field=fields[0]) if fields else None
    )


@defect(
    "category_mismatch",
    """``category_path`` (exactly as stored) differs from the item's file path
         relative to the release root without ``.json``.""",
)
def _category_mismatch(ctx: AuditContext, e: _Entry) -> dict | None:
    expected = default_category_path(e.item.set_name, e.item.scenario_id)
    if e.item.category_path == expected:
        return None
    got = repr(e.item.category_path) if e.item.category_path else "missing"
    return _defect(
        e,
        f"category_path is {got}, but the item's file is {expected!r}",
        field="category_path",
        category_path=e.item.category_path,
        expected=expected,
    )


@lru_cache(maxsize=8)
def load_leak_patterns(relpath: str = LEAK_PATTERNS_FILE) -> tuple[re.Pattern, ...]:
    """The compiled patterns of ``prompts/<relpath>``: one regular expression a line, ``#`` comments."""
    from rmb_build.core.prompting import load_prompt

    patterns = []
    for n, line in enumerate(load_prompt(relpath).splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                patterns.append(re.compile(line, re.IGNORECASE))
            except re.error as exc:
                raise InputError(f"prompts/{relpath}", f"invalid regular expression: {exc}", line=n) from None
    return tuple(patterns)


@defect(
    "leaked_instruction",
    """a turn or an answer matching a pattern of ``prompts/leak_patterns.txt``
         (regular expressions, case-insensitive, matched against the identity text).""",
)
class _Leaks(_PerItem):
    def __init__(self, ctx: AuditContext):
        patterns = ctx.leak_patterns

        # texts repeat (a conversation is in ~7 neighbouring items): a bounded memo, not one of every text
        @lru_cache(maxsize=TEXT_MEMO)
        def first_match(text: str) -> tuple[str, str] | None:
            return next(((p.pattern, m.group(0)) for p in patterns for m in [p.search(text)] if m), None)

        def check(ctx: AuditContext, e: _Entry) -> dict | None:
            hits = [(name, hit) for name, text in e.texts if (hit := first_match(text))]
            if not hits:
                return None
            name, (pattern, matched) = hits[0]
            return _defect(
                e,
                f"{name} contains data-generation prompt text: {display(matched, 80)!r}",
                fields=[h[0] for h in hits],
                field=name,
                pattern=pattern,
            )

        super().__init__(ctx, check)


@defect("unknown_scenario", "an item in a file whose scenario id is not one of RMB's 49.")
def _unknown_scenario(ctx: AuditContext, e: _Entry) -> dict | None:
    return (
        None if is_known(e.item.scenario_id) else _defect(e, f"scenario {e.item.scenario_id!r} is not one of RMB's 49")
    )


def turn_problems(turns: Sequence[Turn]) -> list[str]:
    """Why a conversation is malformed (empty list when it alternates roles and ends with a user turn)."""
    if not turns:
        return ["empty conversation"]
    problems = [f"turn {i} has unknown role {t.role!r}" for i, t in enumerate(turns) if t.role not in VALID_ROLES]
    problems += [
        f"turns {i - 1} and {i} are both {t.role!r}"
        for i, t in enumerate(turns)
        if i > 0 and t.role == turns[i - 1].role
    ]
    if turns[-1].role != "user":
        problems.append(f"ends with a {turns[-1].role!r} turn, not a user turn")
    return problems


@defect(
    "bad_turns",
    """an empty conversation, two consecutive turns with the same role, a last turn
         that is not a user turn, or a role other than user/assistant/system (which strict reading rejects).""",
)
def _bad_turns(ctx: AuditContext, e: _Entry) -> dict | None:
    problems = turn_problems(e.item.conversation)
    if not problems:
        return None
    return _defect(e, "; ".join(problems), field="conversation_input", roles=[t.role for t in e.item.conversation])


def _later_prompt_items(entry: dict) -> list[dict]:
    return list(entry.get("items") or [entry])


@defect(
    "near_duplicate_prompt",
    """two prompts (distinct conversations, or one conversation) used in
         different scenarios, with cosine >= ``near_threshold`` between the embeddings of their search texts
         (or simply equal, which is checked even without embeddings). The pairwise and BoN sets share
         conversations by design: a conversation in both sets of one scenario is one prompt. One entry per
         pair of (conversation, scenario) prompts; it names the later prompt, whose items are all removed.""",
    removes=_later_prompt_items,
)
class _NearDuplicates:
    """Keeps one record an item (its conversation's row, scenario, item number) and one embedding row
    per distinct conversation, embedded in chunks of ``EMBED_CHUNK`` search texts as the
    conversations first appear."""

    def __init__(self, ctx: AuditContext):
        self.ctx = ctx
        self.rows_of: dict[bytes, int] = {}  # conversation -> its row, in first-appearance order
        self.scenarios: dict[str, int] = {}
        # A prompt is a (conversation, scenario); its items are every item of either set that uses it.
        self.uses = _Records(("row", "I"), ("scenario", "I"), ("order", "I"))
        self.pending: list[str] = []  # search texts of conversations not embedded yet
        self.rows: list[Any] = []
        self.embed = ctx.embed
        self.failed: str | None = None  # why embeddings are unavailable

    def add(self, e: _Entry) -> None:
        row = self.rows_of.get(e.conv_key)
        if row is None:
            row = self.rows_of[e.conv_key] = len(self.rows_of)
            if self.ctx.near_duplicates and self.failed is None:
                self.pending.append(search_text(e.item.conversation))
                if len(self.pending) >= EMBED_CHUNK:
                    self._embed_pending()
        scenario = self.scenarios.setdefault(e.item.scenario_id, len(self.scenarios))
        self.uses.append(row, scenario, e.at.order)

    def _embed_pending(self) -> None:
        try:
            from rmb_build.embed.encoder import Encoder

            self.embed = self.embed or Encoder()
            self.rows.append(self.embed(self.pending))
        except (ImportError, OSError) as exc:
            from rmb_build.core.extras import missing_extra

            hint = missing_extra(exc) if isinstance(exc, ImportError) else None
            self.failed = str(hint) if hint else f"{type(exc).__name__}: {exc}"
            self.rows = []
        self.pending = []

    def _vectors(self) -> Any:
        """The embedded chunks as one matrix, each chunk let go once copied (not two copies at once)."""
        import numpy as np

        chunks = [np.asarray(r, dtype=np.float32) for r in self.rows]
        self.rows = []
        vectors = np.empty((sum(len(c) for c in chunks), chunks[0].shape[1]), dtype=np.float32)
        at = 0
        chunks.reverse()
        while chunks:
            chunk = chunks.pop()
            vectors[at : at + len(chunk)] = chunk
            at += len(chunk)
        return vectors

    def _pairs(self, prompt_row: Any, prompt_scenario: Any) -> dict[tuple[int, int], float]:
        """(prompt, prompt) -> cosine, prompts numbered as ``finish`` groups them (sorted by row)."""
        import numpy as np

        ctx = self.ctx
        bounds = np.searchsorted(prompt_row, np.arange(len(self.rows_of) + 1))  # row r: prompts bounds[r]:bounds[r+1]
        pairs: dict[tuple[int, int], float] = {}
        for r in np.flatnonzero(np.diff(bounds) > 1).tolist():  # the same conversation in several scenarios
            for a in range(bounds[r], bounds[r + 1]):
                for b in range(a + 1, bounds[r + 1]):
                    pairs[(a, b)] = 1.0
        ctx.checks["near_duplicates"] = "exact only"
        if not ctx.near_duplicates:
            ctx.notes.append(
                "near_duplicate_prompt: embeddings not used; only prompts repeated exactly in "
                "different scenarios were checked"
            )
            return pairs
        if self.failed is None and (self.pending or not self.rows):
            self._embed_pending()
        if self.failed is not None:
            ctx.notes.append(
                f"near_duplicate_prompt: embeddings unavailable ({self.failed}); "
                f"only prompts repeated exactly in different scenarios were checked"
            )
            return pairs
        from rmb_build.embed.similarity import similar_pairs

        ctx.checks["near_duplicates"] = "embeddings"
        ctx.checks["embedding_model"] = self.embed.fingerprint if hasattr(self.embed, "fingerprint") else "custom"
        ii, jj, sims = similar_pairs(self._vectors(), threshold=ctx.near_threshold)
        for i, j, s in zip(ii.tolist(), jj.tolist(), sims.tolist()):
            for a in range(bounds[i], bounds[i + 1]):
                for b in range(bounds[j], bounds[j + 1]):
                    if prompt_scenario[a] != prompt_scenario[b]:
                        pairs[(a, b)] = max(pairs.get((a, b), 0.0), float(s))
        return pairs

    def finish(self) -> list[dict]:
        uses, bounds = _grouped(self.uses.array(), ["row", "scenario"])  # one group a prompt
        first = bounds[:-1]
        pairs = self._pairs(uses["row"][first], uses["scenario"][first])
        self.ctx.checks["near_threshold"] = self.ctx.near_threshold
        at, first_item, out = self.ctx.items.at, uses["order"][first], []
        for (a, b), sim in pairs.items():
            earlier, later = sorted((a, b), key=lambda g: first_item[g])
            f, e = at(int(first_item[earlier])), at(int(first_item[later]))
            items = uses["order"][bounds[later] : bounds[later + 1]].tolist()
            out.append(
                _defect(
                    e,
                    f"prompt in {e.scenario!r} is a near-duplicate (cosine {sim:.3f}) of "
                    f"uid {f.uid}'s in {f.scenario!r}",
                    similarity=round(sim, 4),
                    other=f.ref(),
                    items=[at(x).ref() for x in items],
                )
            )
        out.sort(key=lambda d: (d["file"], d["index"], d["other"]["file"], d["other"]["index"]))
        return out


@defect(
    "human_disagrees",
    "an item people overruled (their strict majority picked the release's losing answer) or flagged "
    "(wrong scenario, harmful answer preferred, answer cut off, prompt leaked, not English), from "
    "`rmb review`'s labels.jsonl given as `--review`; none when no review is given.",
)
def _human_disagrees(ctx: AuditContext, e: _Entry) -> dict | None:
    verdict = (ctx.review or {}).get((e.item.set_name, str(e.item.uid)))
    if verdict is None:
        return None
    said = []
    if verdict["overruled"]:
        said.append(f"people's majority chose {verdict['majority']} ({verdict['labels']} labels)")
    said += [f"flagged {flag} by {', '.join(who)}" for flag, who in verdict["flags"].items()]
    return _defect(e, "; ".join(said), majority=verdict["majority"], flags=sorted(verdict["flags"]))


def _no_item(entry: dict) -> list[dict]:
    """A style record's defect makes no item of RMB's two sets unusable (``--fix`` removes none)."""
    return []


def _style_defect(rec: StyleRecord, detail: str) -> dict[str, Any]:
    return {"set": STYLE_SET, "uid": rec.id, "file": rec.file, "index": rec.index, "detail": detail}


class _StyleCheck:
    """A check of ``Style_set/``'s records (``ctx.style``), run once every item has been seen."""

    def __init__(self, ctx: AuditContext):
        self.ctx = ctx
        self.uids: dict[str, dict[str, int]] = {PAIRWISE_SET: {}, BON_SET: {}}  # per set, uid: its loser count

    def add(self, e: _Entry) -> None:
        self.uids[e.item.set_name][str(e.item.uid)] = len(getattr(e.item, "losers", ()))

    def finish(self) -> list[dict]:
        return [d for rec in self.ctx.style if (d := self.check(rec)) is not None]

    def check(self, rec: StyleRecord) -> dict | None:
        raise NotImplementedError


@defect(
    "style_orphan",
    "a Style_set record whose id is the pair_uid of no pairwise item of the release (a BoN record's: the bon_uid "
    "of no BoN item, or its loser not in that item's loser_list).",
    _no_item,
)
class _StyleOrphan(_StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        losers = self.uids[rec.set_name].get(rec.id)
        if losers is None:
            uid = "pair_uid" if rec.set_name == PAIRWISE_SET else "bon_uid"
            return _style_defect(rec, f"no {rec.set_name} item has {uid} {rec.id!r}")
        if rec.loser is not None and rec.loser >= losers:
            return _style_defect(rec, f"bon item {rec.id!r} has {losers} losers, no loser_list[{rec.loser}]")
        return None


@defect(
    "style_variants",
    f"a Style_set record without exactly {len(STYLES)} chosen and {len(STYLES)} rejected variants "
    f"({', '.join(STYLES)}), or whose scenario field differs from its file's.",
    _no_item,
)
class _StyleVariants(_StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        wrong = [f"{side} has {len(v)}" for side, v in (("chosen", rec.chosen), ("rejected", rec.rejected))]
        wrong = [w for w, v in zip(wrong, (rec.chosen, rec.rejected)) if len(v) != len(STYLES)]
        if rec.scenario != rec.scenario_id:
            wrong.append(f"scenario {rec.scenario!r} in file of {rec.scenario_id!r}")
        return _style_defect(rec, "; ".join(wrong)) if wrong else None


@defect("style_empty", "a Style_set record with an empty prompt, turn or variant by the identity rule.", _no_item)
class _StyleEmpty(_StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        texts = [("prompt", rec.prompt)] + [
            (f"conversation_input[{i}]", t.content) for i, t in enumerate(rec.conversation)
        ]
        texts += [(f"{side}[{i}]", v) for side in ("chosen", "rejected") for i, v in enumerate(getattr(rec, side))]
        empty = [name for name, text in texts if not identity(text)]
        return _style_defect(rec, f"empty: {', '.join(empty)}") if empty else None


DEFECT_KINDS = tuple(KINDS)  # every kind declared above, in report order


class StreamingAudit:
    """An audit fed one item at a time (``add``, in release order); ``report`` gives every defect.

    What it keeps per item is packed: where the item lives and the digests of its identity texts a
    comparing kind needs (plus one embedding row per distinct conversation), never the item's texts.
    ``near_duplicates`` False skips the embedding model (equal prompts in different scenarios are
    still found). ``leak_patterns`` replaces ``prompts/leak_patterns.txt`` (regular expressions).
    ``embed``: what embeds the prompts (an embedding store reuses a build's vectors); default the
    packaged all-MiniLM-L6-v2.
    """

    def __init__(
        self,
        name: str,
        *,
        near_duplicates: bool = True,
        near_threshold: float = 0.95,
        leak_patterns: Iterable[str] | None = None,
        embed: Callable[[Sequence[str]], Any] | None = None,
        review: Mapping[tuple[str, str], dict] | None = None,
        style: Sequence[StyleRecord] = (),
    ):
        patterns = (
            load_leak_patterns()
            if leak_patterns is None
            else tuple(re.compile(p, re.IGNORECASE) for p in leak_patterns)
        )
        self._report = AuditReport(release=name)
        self._report.checks["leak_patterns"] = len(patterns)
        ctx = AuditContext(
            patterns,
            near_duplicates,
            near_threshold,
            self._report.notes,
            self._report.checks,
            embed,
            review=review,
            style=style,
        )
        if review is not None:
            self._report.checks["review_items"] = len(review)
        self._items = ctx.items
        self._collectors = {k.name: k.collector(ctx) for k in KINDS.values()}
        self._identity = lru_cache(maxsize=TEXT_MEMO)(identity)

    def add(self, item: Item, file: str, index: int) -> None:
        """Audit the item at ``index`` of ``file`` (relative to the release root)."""
        n = self._identity
        conv = tuple((t.role, n(t.content)) for t in item.conversation)
        answers = tuple(n(a.answer) for a in item.answers())
        texts = tuple((f"conversation_input[{i}].content", c) for i, (_, c) in enumerate(conv))
        texts += tuple(zip(_answer_fields(item), answers))
        at = self._items.add(item.set_name, item.uid, file, index, item.scenario_id)
        entry = _Entry(
            item,
            at,
            conv,
            answers,
            texts,
            digest(json.dumps(conv, ensure_ascii=False)),
            tuple(digest(a) for a in answers),
        )
        for collector in self._collectors.values():
            collector.add(entry)

    def report(self) -> AuditReport:
        """The report (call once, after the last ``add``)."""
        self._report.defects = {name: c.finish() for name, c in self._collectors.items()}
        self._report.checks["items"] = len(self._items)
        return self._report


def audit_release(
    release: Release,
    *,
    near_duplicates: bool = True,
    near_threshold: float = 0.95,
    leak_patterns: Iterable[str] | None = None,
    embed: Callable[[Sequence[str]], Any] | None = None,
    review: Mapping[tuple[str, str], dict] | None = None,
) -> AuditReport:
    """Every defect of ``release`` (read it with ``strict=False`` so that defective releases load);
    the options are ``StreamingAudit``'s (``review``: people's verdicts per (set, uid), from
    ``review_labels.human_verdicts``)."""
    audit = StreamingAudit(
        release.name,
        near_duplicates=near_duplicates,
        near_threshold=near_threshold,
        leak_patterns=leak_patterns,
        embed=embed,
        review=review,
        style=release.style,
    )
    for (set_name, scenario_id), items in release.files.items():
        file = set_file(set_name, scenario_id)
        for index, item in enumerate(items):
            audit.add(item, file, index)
    return audit.report()


# ---------------------------------------------------------------------------------------------
# Fixing


def _kind_order(kind: str) -> tuple[int, str]:
    return (DEFECT_KINDS.index(kind) if kind in DEFECT_KINDS else len(DEFECT_KINDS), kind)


def defects_phrase(defects: int, items: int | None) -> str:
    """The one way a defect count is said: ``7 defects on 10 items`` (the items that ``fix_release``
    removes, which ``--skip-defective`` leaves out, or renumbers: a duplicate pair is one defect on one item)."""
    said = f"{defects} defect{'' if defects == 1 else 's'}"
    return said if items is None else f"{said} on {items} item{'' if items == 1 else 's'}"


def removal_refs(kind: str, entry: dict) -> list[dict]:
    """The items a defect makes unusable, by its kind's fixer (a kind this version does not know
    removes the item it names)."""
    return KINDS[kind].removes(entry) if kind in KINDS else _named_item(entry)


def fix_release(
    release: Release, report: AuditReport, kinds: Iterable[str] | None = None
) -> tuple[Release, list[dict]]:
    """A copy of ``release`` without the items the report's defects name, the items of a renumbering
    kind (``uid_collision``) under their new uid, and the log of what changed.

    ``kinds`` limits the fix to some defect kinds (all by default). Files left empty are dropped.
    Each log line: ``action`` (``removed`` or ``renumbered``, with ``new_uid``), set, uid, file, index,
    kinds, details, and the item as it was in RMB's form. The input release is not modified.
    """
    kinds = list(DEFECT_KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in report.defects and k not in DEFECT_KINDS]
    if unknown:
        raise RMBError(f"unknown defect kind(s): {', '.join(unknown)} (known: {', '.join(DEFECT_KINDS)})")
    files = {set_file(s, sc): (s, sc) for (s, sc) in release.files}

    def check(ref: dict) -> tuple[str, int]:
        key = files.get(ref["file"])
        items = release.files.get(key, []) if key else []
        if not (0 <= ref["index"] < len(items)) or items[ref["index"]].uid != ref["uid"]:
            raise RMBError(
                f"the audit report does not match release {release.name!r}: no item "
                f"uid {ref['uid']} at index {ref['index']} of {ref['file']}"
            )
        return ref["file"], ref["index"]

    reasons: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    renumber: dict[tuple[str, int], tuple[str, str, str]] = {}  # -> (new uid, kind, detail)
    for kind in kinds:
        for entry in report.defects.get(kind, []):
            if kind in KINDS and KINDS[kind].renumbers:
                renumber[check(entry)] = (str(entry["new_uid"]), kind, entry["detail"])
            for ref in removal_refs(kind, entry):
                reasons[check(ref)].append((kind, entry["detail"]))
    clean = Release(
        name=release.name, root=None, manifest=copy.deepcopy(release.manifest), source_format=release.source_format
    )
    log = []
    for (set_name, scenario_id), items in release.files.items():
        file = set_file(set_name, scenario_id)
        kept = []
        for index, item in enumerate(items):
            where = {"set": set_name, "uid": item.uid, "file": file, "index": index}
            why = reasons.get((file, index))
            if why is not None:
                kinds_of = sorted({k for k, _ in why}, key=_kind_order)
                details = list(dict.fromkeys(d for _, d in why))
                log.append({"action": "removed", **where, "kinds": kinds_of, "details": details, "item": item.to_rmb()})
                continue
            if (file, index) in renumber:
                new_uid, kind, detail = renumber[(file, index)]
                entry = {"action": "renumbered", **where, "new_uid": new_uid, "kinds": [kind], "details": [detail]}
                log.append({**entry, "item": item.to_rmb()})
                item = dataclasses.replace(item, uid=new_uid)
            kept.append(item)
        if kept or not items:
            clean.files[(set_name, scenario_id)] = kept
    return clean, log


__all__ = [
    "AuditContext",
    "AuditReport",
    "Collector",
    "DEFECT_KINDS",
    "DefectKind",
    "KINDS",
    "StreamingAudit",
    "audit_release",
    "defect",
    "digest",
    "defects_phrase",
    "definitions",
    "fix_release",
    "load_leak_patterns",
    "removal_refs",
    "turn_problems",
]
