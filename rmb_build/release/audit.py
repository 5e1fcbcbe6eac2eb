"""Audit a release: find every defect of each declared kind, report them, write a cleaned copy.

A defect kind is one ``@defect(name, definition)`` declaration on its check function (below, in
report order); ``removes`` names its fixer (which items ``fix_release`` takes out: the named item
unless said otherwise). Adding a kind is one more declaration: ``DEFECT_KINDS``, the report's
counts (every kind, 0 when none was found), the card's table and ``definitions()`` follow.

Texts are compared by ``rmb_build.text.identity`` (NFKC, case folded, whitespace collapsed), the
same rule ``build_sets`` merges equal answers by, except for ``duplicate_item`` (exact copies, as
stored); ``llm_name`` and a turn's ``language`` never count. A conversation is its turns'
(role, identity(content)) in order. Each entry has ``set``, ``uid``, ``file``, ``index`` (position
in the file), ``scenario``, ``detail``, and kind-specific fields.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

from ..errors import InputError, RMBError
from ..items import BonItem, Item, PairwiseItem, Turn, default_category_path, set_file
from ..taxonomy import PAIRWISE_SET, is_known
from ..text import display, identity, search_text
from .read import Release
from .rmb_format import VALID_ROLES

SCHEMA_VERSION = 1
LEAK_PATTERNS_FILE = "leak_patterns.txt"


@dataclass
class AuditContext:
    """What a check gets: the release's entries, the audit's options, and where to leave notes."""

    entries: list["_Entry"]
    leak_patterns: Sequence[re.Pattern]
    near_duplicates: bool
    near_threshold: float
    notes: list[str]
    checks: dict[str, Any]
    embed: Callable[[Sequence[str]], Any] | None = None  # texts -> unit rows; None: the default encoder


def _named_item(entry: dict) -> list[dict]:
    return [entry]


@dataclass(frozen=True)
class DefectKind:
    """One kind of defect: its name, its definition, the check that finds it and its fixer
    (``removes``: the items a defect entry makes unusable)."""

    name: str
    definition: str
    check: Callable[[AuditContext], list[dict]]
    removes: Callable[[dict], list[dict]] = _named_item


KINDS: dict[str, DefectKind] = {}


def defect(name: str, definition: str, removes: Callable[[dict], list[dict]] = _named_item):
    """Declare the check function below as defect kind ``name`` (report order: declaration order)."""
    def register(check: Callable[[AuditContext], list[dict]]) -> Callable[[AuditContext], list[dict]]:
        if name in KINDS:
            raise ValueError(f"defect kind {name!r} declared twice")
        KINDS[name] = DefectKind(name, " ".join(definition.split()), check, removes)
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
        return {k: len(self.defects.get(k, [])) for k in (*DEFECT_KINDS, *sorted(set(self.defects) - set(DEFECT_KINDS)))}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def flagged_items(self) -> set[tuple[str, str, int]]:
        """(set, file, index) of every item that ``fix_release`` would remove."""
        return {(r["set"], r["file"], r["index"]) for kind, entries in self.defects.items()
                for e in entries for r in removal_refs(kind, e)}

    def summary(self) -> dict[str, Any]:
        """What a manifest or a dataset card records: counts, total, items flagged, notes."""
        return {"counts": self.counts, "total": self.total, "items_flagged": len(self.flagged_items()),
                "notes": list(self.notes), "checks": dict(self.checks)}

    def to_json(self) -> dict[str, Any]:
        """The audit JSON: ``schema_version``, ``release``, ``counts`` (every kind), ``defects``, plus ``total``,
        ``items_flagged``, ``checks`` and ``notes``."""
        return {"schema_version": SCHEMA_VERSION, "release": self.release, "counts": self.counts,
                "total": self.total, "items_flagged": len(self.flagged_items()), "checks": self.checks,
                "notes": self.notes, "defects": {k: self.defects.get(k, []) for k in self.counts}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AuditReport":
        defects = {k: [] for k in DEFECT_KINDS}
        defects.update({k: list(v) for k, v in data.get("defects", {}).items()})
        return cls(release=data.get("release", ""), defects=defects, notes=list(data.get("notes", [])),
                   checks=dict(data.get("checks", {})))


# ---------------------------------------------------------------------------------------------
# Walking the release


@dataclass(frozen=True, slots=True)
class _Entry:
    """One item with where it lives (``order``: position in the whole release) and its identity texts:
    ``conv`` the conversation, ``answers`` in ``item.answers()`` order, ``texts`` (RMB field, text)."""

    item: Item
    file: str
    index: int
    order: int
    conv: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]
    texts: tuple[tuple[str, str], ...]

    def ref(self) -> dict[str, Any]:
        it = self.item
        return {"set": it.set_name, "uid": it.uid, "file": self.file, "index": self.index, "scenario": it.scenario_id}


def _answer_fields(item: Item) -> list[str]:
    if isinstance(item, PairwiseItem):
        return ["chosen.answer", "reject.answer"]
    return ["bon_best.answer", *(f"loser_list[{i}].answer" for i in range(len(item.losers)))]


def _entries(release: Release) -> list[_Entry]:
    out: list[_Entry] = []
    memo: dict[str, str] = {}  # texts repeat a lot (a conversation is in ~7 items): reduce each once

    def n(text: str) -> str:
        got = memo.get(text)
        if got is None:
            got = memo[text] = identity(text)
        return got

    for (set_name, scenario_id), items in release.files.items():
        file = set_file(set_name, scenario_id)
        for index, item in enumerate(items):
            conv = tuple((t.role, n(t.content)) for t in item.conversation)
            answers = tuple(n(a.answer) for a in item.answers())
            texts = tuple((f"conversation_input[{i}].content", c) for i, (_, c) in enumerate(conv))
            texts += tuple(zip(_answer_fields(item), answers))
            out.append(_Entry(item, file, index, len(out), conv, answers, texts))
    return out


def _defect(e: _Entry, detail: str, **extra: Any) -> dict[str, Any]:
    return {**e.ref(), "detail": detail, **extra}


# ---------------------------------------------------------------------------------------------
# The defect kinds, in report order: each check takes the AuditContext and returns its kind's entries


@defect("identical_pair", "a pairwise item whose chosen and rejected answers are the same text.")
def _identical_pairs(ctx: AuditContext) -> list[dict]:
    return [_defect(e, "chosen and rejected answers are equal after normalisation",
                    chosen_model=e.item.chosen.llm_name, rejected_model=e.item.rejected.llm_name)
            for e in ctx.entries if isinstance(e.item, PairwiseItem) and e.answers[0] == e.answers[1]]


def _raw_key(item: Item) -> tuple:
    conv = tuple((t.role, t.content) for t in item.conversation)
    if isinstance(item, PairwiseItem):
        return (conv, item.chosen.answer, item.rejected.answer)
    return (conv, item.best.answer, tuple(sorted(a.answer for a in item.losers)))


@defect("duplicate_item", """an item equal to an earlier item of the same set, in any of its files: the
         same turns' role and content and the same answer strings, compared as stored (chosen and rejected
         in place; or best and the multiset of losers). One entry per extra copy; ``first`` names the copy
         that is kept. Copies that differ only in whitespace are not duplicates.""")
def _duplicates(ctx: AuditContext) -> list[dict]:
    first: dict[tuple, _Entry] = {}
    out = []
    for e in ctx.entries:
        key = (e.item.set_name, _raw_key(e.item))
        if key not in first:
            first[key] = e
            continue
        f = first[key]
        out.append(_defect(e, f"same conversation and answers as uid {f.item.uid} in {f.file}",
                           first=f.ref()))
    return out


@defect("unwinnable_bon", "a BoN item whose best answer is the same text as one of its losers.")
def _unwinnable(ctx: AuditContext) -> list[dict]:
    out = []
    for e in ctx.entries:
        if isinstance(e.item, BonItem):
            hits = [i for i, a in enumerate(e.answers[1:]) if a == e.answers[0]]
            if hits:
                out.append(_defect(e, f"best answer equals loser_list[{hits[0]}] after normalisation",
                                   losers=hits, field=f"loser_list[{hits[0]}].answer"))
    return out


def _both_items(entry: dict) -> list[dict]:
    return [entry, entry["other"]]


@defect("contradiction", """one entry per conflicting pair of items: two pairwise items on the same
         conversation, one preferring A to B and the other B to A (A != B); or a BoN item and a pairwise
         item on the same conversation where the pairwise item prefers one of the BoN item's losers to its
         best answer. The entry names the later pairwise item (or the BoN item); ``other`` the second one.
         Both items are removed.""", removes=_both_items)
def _contradictions(ctx: AuditContext) -> list[dict]:
    entries = ctx.entries
    # (conversation, preferred, dispreferred) -> pairwise items stating that preference
    prefers: dict[tuple, list[_Entry]] = defaultdict(list)
    for e in entries:
        if isinstance(e.item, PairwiseItem):
            a, b = e.answers
            if a != b:
                prefers[(e.conv, a, b)].append(e)
    out = []
    for (conv, a, b), items in prefers.items():
        for x in items:
            for y in prefers.get((conv, b, a), ()):
                if y.order < x.order:  # each conflicting pair once, named by its later item
                    out.append(_defect(x, f"prefers the answer that pairwise uid {y.item.uid} rejects, "
                                          f"and rejects the one it prefers", other=y.ref()))
    for e in entries:
        if not isinstance(e.item, BonItem):
            continue
        conv, best = e.conv, e.answers[0]
        for loser in dict.fromkeys(e.answers[1:]):
            if loser == best:
                continue
            for y in prefers.get((conv, loser, best), ()):
                out.append(_defect(e, f"pairwise uid {y.item.uid} prefers one of this item's losers "
                                      f"to its best answer", other=y.ref()))
    out.sort(key=lambda d: (d["set"] != PAIRWISE_SET, d["file"], d["index"], d["other"]["file"], d["other"]["index"]))
    return out


def _items_on_the_cycle(entry: dict) -> list[dict]:
    return list(entry.get("items") or [entry])


@defect("cycle", """three or more distinct answers of one conversation preferred in a loop (A > B > C > A).
         Per conversation, a directed graph over its answers' identity texts: an edge chosen -> rejected for
         each pairwise item, best -> each loser for each BoN item (edges between equal texts left out). Each
         elementary cycle of length >= 3 (no answer repeated; rotations are the same cycle) is one entry;
         two-answer loops are ``contradiction``. The entry names the cycle's earliest item; ``items`` lists
         every item stating one of its preferences, ``answers`` the cycle's length. All of them are removed:
         no preference on the loop can be trusted.""", removes=_items_on_the_cycle)
def _cycles(ctx: AuditContext) -> list[dict]:
    import networkx as nx

    # conversation -> (preferred, dispreferred) -> items stating it
    edges: dict[tuple, dict[tuple[str, str], list[_Entry]]] = defaultdict(lambda: defaultdict(list))
    for e in ctx.entries:
        best, others = e.answers[0], e.answers[1:]
        for other in dict.fromkeys(others):
            if other != best:
                edges[e.conv][(best, other)].append(e)
    out = []
    for conv_edges in edges.values():
        graph = nx.DiGraph(list(conv_edges))
        for cycle in nx.simple_cycles(graph):
            if len(cycle) < 3:
                continue
            steps = list(zip(cycle, cycle[1:] + cycle[:1]))
            items = sorted({x.order: x for step in steps for x in conv_edges[step]}.values(), key=lambda x: x.order)
            first = items[0]
            out.append(_defect(first, f"{len(cycle)} answers preferred in a loop by "
                                      f"{', '.join(f'{x.item.set_name} uid {x.item.uid}' for x in items)}",
                               answers=len(cycle), items=[x.ref() for x in items]))
    out.sort(key=lambda d: (d["set"] != PAIRWISE_SET, d["file"], d["index"], [(r["file"], r["index"]) for r in d["items"]]))
    return out


@defect("empty_text", "an item with a turn or an answer that is empty by the identity rule (whitespace only).")
def _empty_texts(ctx: AuditContext) -> list[dict]:
    out = []
    for e in ctx.entries:
        fields = [name for name, text in e.texts if not text]
        if fields:
            out.append(_defect(e, f"empty or whitespace-only: {', '.join(fields)}", fields=fields, field=fields[0]))
    return out


@defect("category_mismatch", """``category_path`` (exactly as stored) differs from the item's file path
         relative to the release root without ``.json``.""")
def _category_mismatches(ctx: AuditContext) -> list[dict]:
    out = []
    for e in ctx.entries:
        expected = default_category_path(e.item.set_name, e.item.scenario_id)
        if e.item.category_path != expected:
            got = repr(e.item.category_path) if e.item.category_path else "missing"
            out.append(_defect(e, f"category_path is {got}, but the item's file is {expected!r}",
                               field="category_path", category_path=e.item.category_path, expected=expected))
    return out


@lru_cache(maxsize=8)
def load_leak_patterns(relpath: str = LEAK_PATTERNS_FILE) -> tuple[re.Pattern, ...]:
    """The compiled patterns of ``prompts/<relpath>``: one regular expression a line, ``#`` comments."""
    from ..prompting import load_prompt

    patterns = []
    for n, line in enumerate(load_prompt(relpath).splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                patterns.append(re.compile(line, re.IGNORECASE))
            except re.error as exc:
                raise InputError(f"prompts/{relpath}", f"invalid regular expression: {exc}", line=n) from None
    return tuple(patterns)


@defect("leaked_instruction", """a turn or an answer matching a pattern of ``prompts/leak_patterns.txt``
         (regular expressions, case-insensitive, matched against the identity text).""")
def _leaks(ctx: AuditContext) -> list[dict]:
    patterns = ctx.leak_patterns
    memo: dict[str, tuple[str, str] | None] = {}

    def first_match(text: str) -> tuple[str, str] | None:
        if text not in memo:
            memo[text] = next(((p.pattern, m.group(0)) for p in patterns for m in [p.search(text)] if m), None)
        return memo[text]

    out = []
    for e in ctx.entries:
        hits = [(name, hit) for name, text in e.texts if (hit := first_match(text))]
        if hits:
            name, (pattern, matched) = hits[0]
            out.append(_defect(e, f"{name} contains data-generation prompt text: {display(matched, 80)!r}",
                               fields=[h[0] for h in hits], field=name, pattern=pattern))
    return out


@defect("unknown_scenario", "an item in a file whose scenario id is not one of RMB's 49.")
def _unknown_scenarios(ctx: AuditContext) -> list[dict]:
    return [_defect(e, f"scenario {e.item.scenario_id!r} is not one of RMB's 49")
            for e in ctx.entries if not is_known(e.item.scenario_id)]


def turn_problems(turns: Sequence[Turn]) -> list[str]:
    """Why a conversation is malformed (empty list when it alternates roles and ends with a user turn)."""
    if not turns:
        return ["empty conversation"]
    problems = [f"turn {i} has unknown role {t.role!r}" for i, t in enumerate(turns) if t.role not in VALID_ROLES]
    problems += [f"turns {i - 1} and {i} are both {t.role!r}" for i, t in enumerate(turns)
                 if i > 0 and t.role == turns[i - 1].role]
    if turns[-1].role != "user":
        problems.append(f"ends with a {turns[-1].role!r} turn, not a user turn")
    return problems


@defect("bad_turns", """an empty conversation, two consecutive turns with the same role, a last turn
         that is not a user turn, or a role other than user/assistant/system (which strict reading rejects).""")
def _bad_turns(ctx: AuditContext) -> list[dict]:
    out = []
    for e in ctx.entries:
        problems = turn_problems(e.item.conversation)
        if problems:
            out.append(_defect(e, "; ".join(problems), field="conversation_input",
                               roles=[t.role for t in e.item.conversation]))
    return out


def _later_prompt_items(entry: dict) -> list[dict]:
    return list(entry.get("items") or [entry])


@defect("near_duplicate_prompt", """two prompts (distinct conversations, or one conversation) used in
         different scenarios, with cosine >= ``near_threshold`` between the embeddings of their search texts
         (or simply equal, which is checked even without embeddings). The pairwise and BoN sets share
         conversations by design: a conversation in both sets of one scenario is one prompt. One entry per
         pair of (conversation, scenario) prompts; it names the later prompt, whose items are all removed.""",
        removes=_later_prompt_items)
def _near_duplicates(ctx: AuditContext) -> list[dict]:
    entries, threshold, notes, checks = ctx.entries, ctx.near_threshold, ctx.notes, ctx.checks
    # A prompt is a (conversation, scenario); its items are every item of either set that uses it.
    prompts: dict[tuple, list[_Entry]] = defaultdict(list)
    for e in entries:
        prompts[(e.conv, e.item.scenario_id)].append(e)
    by_conv: dict[tuple, list[tuple]] = defaultdict(list)
    for key in prompts:
        by_conv[key[0]].append(key)
    pairs: dict[tuple[tuple, tuple], float] = {}
    for keys in by_conv.values():  # the same conversation in several scenarios
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                pairs[(a, b)] = 1.0
    checks["near_duplicates"] = "exact only"
    if ctx.near_duplicates:
        convs = list(by_conv)
        try:
            from ..embeddings import Encoder
            from ..similarity import similar_pairs

            embed = ctx.embed or Encoder()
            vectors = embed([search_text(prompts[by_conv[conv][0]][0].item.conversation) for conv in convs])
            checks["near_duplicates"] = "embeddings"
            checks["embedding_model"] = embed.fingerprint if hasattr(embed, "fingerprint") else "custom"
        except (ImportError, OSError) as exc:
            notes.append(f"near_duplicate_prompt: embeddings unavailable ({type(exc).__name__}: {exc}); "
                         f"only prompts repeated exactly in different scenarios were checked")
        else:
            ii, jj, sims = similar_pairs(vectors, threshold=threshold)
            for i, j, s in zip(ii.tolist(), jj.tolist(), sims.tolist()):
                for a in by_conv[convs[i]]:
                    for b in by_conv[convs[j]]:
                        if a[1] != b[1]:
                            pairs[(a, b)] = max(pairs.get((a, b), 0.0), float(s))
    else:
        notes.append("near_duplicate_prompt: embeddings not used; only prompts repeated exactly in "
                     "different scenarios were checked")
    checks["near_threshold"] = threshold
    out = []
    for (a, b), sim in pairs.items():
        first, later = sorted((prompts[a], prompts[b]), key=lambda items: items[0].order)
        f, e = first[0], later[0]
        out.append(_defect(e, f"prompt in {e.item.scenario_id!r} is a near-duplicate (cosine {sim:.3f}) of "
                              f"uid {f.item.uid}'s in {f.item.scenario_id!r}",
                           similarity=round(sim, 4), other=f.ref(), items=[x.ref() for x in later]))
    out.sort(key=lambda d: (d["file"], d["index"], d["other"]["file"], d["other"]["index"]))
    return out


DEFECT_KINDS = tuple(KINDS)  # every kind declared above, in report order


def audit_release(release: Release, *, near_duplicates: bool = True, near_threshold: float = 0.95,
                  leak_patterns: Iterable[str] | None = None,
                  embed: Callable[[Sequence[str]], Any] | None = None) -> AuditReport:
    """Every defect of ``release`` (read it with ``strict=False`` so that defective releases load).

    ``near_duplicates`` False skips the embedding model (equal prompts in different scenarios are
    still found). ``leak_patterns`` replaces ``prompts/leak_patterns.txt`` (regular expressions).
    ``embed``: what embeds the prompts (an embedding store reuses a build's vectors); default the
    packaged all-MiniLM-L6-v2.
    """
    entries = _entries(release)
    patterns = (load_leak_patterns() if leak_patterns is None
                else tuple(re.compile(p, re.IGNORECASE) for p in leak_patterns))
    report = AuditReport(release=release.name)
    report.checks["leak_patterns"] = len(patterns)
    ctx = AuditContext(entries, patterns, near_duplicates, near_threshold, report.notes, report.checks, embed)
    report.defects = {k.name: k.check(ctx) for k in KINDS.values()}
    report.checks["items"] = len(entries)
    return report


# ---------------------------------------------------------------------------------------------
# Fixing


def _kind_order(kind: str) -> tuple[int, str]:
    return (DEFECT_KINDS.index(kind) if kind in DEFECT_KINDS else len(DEFECT_KINDS), kind)


def removal_refs(kind: str, entry: dict) -> list[dict]:
    """The items a defect makes unusable, by its kind's fixer (a kind this version does not know
    removes the item it names)."""
    return KINDS[kind].removes(entry) if kind in KINDS else _named_item(entry)


def fix_release(release: Release, report: AuditReport,
                kinds: Iterable[str] | None = None) -> tuple[Release, list[dict]]:
    """A copy of ``release`` without the items the report's defects name, and the log of what went.

    ``kinds`` limits the fix to some defect kinds (all by default). Files left empty are dropped.
    Each log line: set, uid, file, index, kinds, details, and the removed item in RMB's form.
    The input release is not modified.
    """
    kinds = list(DEFECT_KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in report.defects and k not in DEFECT_KINDS]
    if unknown:
        raise RMBError(f"unknown defect kind(s): {', '.join(unknown)} (known: {', '.join(DEFECT_KINDS)})")
    files = {set_file(s, sc): (s, sc) for (s, sc) in release.files}
    reasons: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    for kind in kinds:
        for entry in report.defects.get(kind, []):
            for ref in removal_refs(kind, entry):
                key = files.get(ref["file"])
                items = release.files.get(key, []) if key else []
                if not (0 <= ref["index"] < len(items)) or items[ref["index"]].uid != ref["uid"]:
                    raise RMBError(f"the audit report does not match release {release.name!r}: no item "
                                   f"uid {ref['uid']} at index {ref['index']} of {ref['file']}")
                reasons[(ref["file"], ref["index"])].append((kind, entry["detail"]))
    clean = Release(name=release.name, root=None, manifest=copy.deepcopy(release.manifest),
                    source_format=release.source_format)
    log = []
    for (set_name, scenario_id), items in release.files.items():
        file = set_file(set_name, scenario_id)
        kept = []
        for index, item in enumerate(items):
            why = reasons.get((file, index))
            if why is None:
                kept.append(item)
                continue
            log.append({"set": set_name, "uid": item.uid, "file": file, "index": index,
                        "kinds": sorted({k for k, _ in why}, key=_kind_order),
                        "details": list(dict.fromkeys(d for _, d in why)), "item": item.to_rmb()})
        if kept or not items:
            clean.files[(set_name, scenario_id)] = kept
    return clean, log


__all__ = ["AuditContext", "AuditReport", "DEFECT_KINDS", "DefectKind", "KINDS", "audit_release", "defect",
           "definitions", "fix_release", "load_leak_patterns", "removal_refs", "turn_problems"]
