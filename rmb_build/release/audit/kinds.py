"""The defect kinds, in report order: each a ``@defect(name, definition)`` declaration on its per-item
check function, or on its collector class where it compares items.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import lru_cache
from graphlib import CycleError, TopologicalSorter
from typing import Any, Iterable, Iterator, Sequence

from rmb_build.core.errors import InputError
from rmb_build.core.items import BonItem, Item, PairwiseItem, Turn, default_category_path
from rmb_build.core.taxonomy import PAIRWISE_SET, is_known
from rmb_build.core.text import display, identity, search_text
from rmb_build.release.audit.kind import (
    TEXT_MEMO,
    AuditContext,
    Entry,
    PerItem,
    defect,
    defect_entry,
    no_item,
)
from rmb_build.release.audit.packed import Items, Records, digest, grouped, runs
from rmb_build.release.rmb_format import VALID_ROLES
from rmb_build.release.style_set import STYLE_SET, STYLES, StyleRecord

EMBED_CHUNK = 256  # conversations' search texts embedded at a time

LEAK_PATTERNS_FILE = "leak_patterns.txt"


@defect("identical_pair", "a pairwise item whose chosen and rejected answers are the same text.")
def _identical_pair(ctx: AuditContext, e: Entry) -> dict | None:
    if isinstance(e.item, PairwiseItem) and e.answers[0] == e.answers[1]:
        return defect_entry(
            e,
            "chosen and rejected answers are equal after normalisation",
            chosen_model=e.item.chosen.llm_name,
            rejected_model=e.item.rejected.llm_name,
        )
    return None


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


@defect("unwinnable_bon", "a BoN item whose best answer is the same text as one of its losers.")
def _unwinnable(ctx: AuditContext, e: Entry) -> dict | None:
    if isinstance(e.item, BonItem):
        hits = [i for i, a in enumerate(e.answers[1:]) if a == e.answers[0]]
        if hits:
            return defect_entry(
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
        self.edges = Records(("conv", "16s"), ("better", "16s"), ("worse", "16s"), ("order", "I"), ("pairwise", "?"))

    def add(self, e: Entry) -> None:
        best, pairwise = e.answer_keys[0], isinstance(e.item, PairwiseItem)
        for other in dict.fromkeys(e.answer_keys[1:]):
            if other != best:
                self.edges.append(e.conv_key, best, other, e.at.order, pairwise)

    def conversations(self, min_edges: int) -> Iterator[list[tuple[bytes, bytes, int, bool]]]:
        """Each conversation's edges (better, worse, item, pairwise) in item order, where it has
        at least ``min_edges``."""
        for run in runs(self.edges.array(), ["conv"], min_size=min_edges):
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
                    out.append(defect_entry(at(order), detail, other=y.ref()))
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
                    defect_entry(
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
def _empty_text(ctx: AuditContext, e: Entry) -> dict | None:
    fields = [name for name, text in e.texts if not text]
    return (
        defect_entry(e, f"empty or whitespace-only: {', '.join(fields)}", fields=fields, field=fields[0])
        if fields
        else None
    )


@defect(
    "category_mismatch",
    """``category_path`` (exactly as stored) differs from the item's file path
         relative to the release root without ``.json``.""",
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
class _Leaks(PerItem):
    def __init__(self, ctx: AuditContext):
        patterns = ctx.leak_patterns

        # texts repeat (a conversation is in ~7 neighbouring items): a bounded memo, not one of every text
        @lru_cache(maxsize=TEXT_MEMO)
        def first_match(text: str) -> tuple[str, str] | None:
            return next(((p.pattern, m.group(0)) for p in patterns for m in [p.search(text)] if m), None)

        def check(ctx: AuditContext, e: Entry) -> dict | None:
            hits = [(name, hit) for name, text in e.texts if (hit := first_match(text))]
            if not hits:
                return None
            name, (pattern, matched) = hits[0]
            return defect_entry(
                e,
                f"{name} contains data-generation prompt text: {display(matched, 80)!r}",
                fields=[h[0] for h in hits],
                field=name,
                pattern=pattern,
            )

        super().__init__(ctx, check)


@defect("unknown_scenario", "an item in a file whose scenario id is not one of RMB's 49.")
def _unknown_scenario(ctx: AuditContext, e: Entry) -> dict | None:
    return (
        None
        if is_known(e.item.scenario_id)
        else defect_entry(e, f"scenario {e.item.scenario_id!r} is not one of RMB's 49")
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
def _bad_turns(ctx: AuditContext, e: Entry) -> dict | None:
    problems = turn_problems(e.item.conversation)
    if not problems:
        return None
    return defect_entry(e, "; ".join(problems), field="conversation_input", roles=[t.role for t in e.item.conversation])


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
        self.uses = Records(("row", "I"), ("scenario", "I"), ("order", "I"))
        self.pending: list[str] = []  # search texts of conversations not embedded yet
        self.rows: list[Any] = []
        self.embed = ctx.embed
        self.failed: str | None = None  # why embeddings are unavailable

    def add(self, e: Entry) -> None:
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
        uses, bounds = grouped(self.uses.array(), ["row", "scenario"])  # one group a prompt
        first = bounds[:-1]
        pairs = self._pairs(uses["row"][first], uses["scenario"][first])
        self.ctx.checks["near_threshold"] = self.ctx.near_threshold
        at, first_item, out = self.ctx.items.at, uses["order"][first], []
        for (a, b), sim in pairs.items():
            earlier, later = sorted((a, b), key=lambda g: first_item[g])
            f, e = at(int(first_item[earlier])), at(int(first_item[later]))
            items = uses["order"][bounds[later] : bounds[later + 1]].tolist()
            out.append(
                defect_entry(
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
def _human_disagrees(ctx: AuditContext, e: Entry) -> dict | None:
    verdict = (ctx.review or {}).get((e.item.set_name, str(e.item.uid)))
    if verdict is None:
        return None
    said = []
    if verdict["overruled"]:
        said.append(f"people's majority chose {verdict['majority']} ({verdict['labels']} labels)")
    said += [f"flagged {flag} by {', '.join(who)}" for flag, who in verdict["flags"].items()]
    return defect_entry(e, "; ".join(said), majority=verdict["majority"], flags=sorted(verdict["flags"]))


def _style_defect(rec: StyleRecord, detail: str) -> dict[str, Any]:
    return {"set": STYLE_SET, "uid": rec.id, "file": rec.file, "index": rec.index, "detail": detail}


class _StyleCheck:
    """A check of ``Style_set/``'s records (``ctx.style``), run once every item has been seen."""

    def __init__(self, ctx: AuditContext):
        self.ctx = ctx
        self.pairwise: set[str] = set()

    def add(self, e: Entry) -> None:
        if isinstance(e.item, PairwiseItem):
            self.pairwise.add(str(e.item.uid))

    def finish(self) -> list[dict]:
        return [d for rec in self.ctx.style if (d := self.check(rec)) is not None]

    def check(self, rec: StyleRecord) -> dict | None:
        raise NotImplementedError


@defect("style_orphan", "a Style_set record whose id is the pair_uid of no pairwise item of the release.", no_item)
class _StyleOrphan(_StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        return None if rec.id in self.pairwise else _style_defect(rec, f"no pairwise item has pair_uid {rec.id!r}")


@defect(
    "style_variants",
    f"a Style_set record without exactly {len(STYLES)} chosen and {len(STYLES)} rejected variants "
    f"({', '.join(STYLES)}), or whose scenario field differs from its file's.",
    no_item,
)
class _StyleVariants(_StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        wrong = [f"{side} has {len(v)}" for side, v in (("chosen", rec.chosen), ("rejected", rec.rejected))]
        wrong = [w for w, v in zip(wrong, (rec.chosen, rec.rejected)) if len(v) != len(STYLES)]
        if rec.scenario != rec.scenario_id:
            wrong.append(f"scenario {rec.scenario!r} in file of {rec.scenario_id!r}")
        return _style_defect(rec, "; ".join(wrong)) if wrong else None


@defect("style_empty", "a Style_set record with an empty prompt, turn or variant by the identity rule.", no_item)
class _StyleEmpty(_StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        texts = [("prompt", rec.prompt)] + [
            (f"conversation_input[{i}]", t.content) for i, t in enumerate(rec.conversation)
        ]
        texts += [(f"{side}[{i}]", v) for side in ("chosen", "rejected") for i, v in enumerate(getattr(rec, side))]
        empty = [name for name, text in texts if not identity(text)]
        return _style_defect(rec, f"empty: {', '.join(empty)}") if empty else None
