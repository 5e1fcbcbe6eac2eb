"""The streaming audit: items fed one at a time, every declared kind's collector fed each, then the report."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Sequence

from rmb_build.core.items import Item, set_file
from rmb_build.core.text import identity
from rmb_build.release.audit.kind import (
    TEXT_MEMO,
    AuditContext,
    Entry,
    answer_fields,
    in_report_order,
)
from rmb_build.release.audit.kinds.leaked_instruction import load_leak_patterns
from rmb_build.release.audit.packed import digest
from rmb_build.release.audit.report import AuditReport
from rmb_build.release.read import Release
from rmb_build.release.style_set import StyleRecord


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
        self._collectors = {k.name: k.collector(ctx) for k in in_report_order()}  # finish in report order too
        self._identity = lru_cache(maxsize=TEXT_MEMO)(identity)

    def add(self, item: Item, file: str, index: int) -> None:
        """Audit the item at ``index`` of ``file`` (relative to the release root)."""
        n = self._identity
        conv = tuple((t.role, n(t.content)) for t in item.conversation)
        answers = tuple(n(a.answer) for a in item.answers())
        texts = tuple((f"conversation_input[{i}].content", c) for i, (_, c) in enumerate(conv))
        texts += tuple(zip(answer_fields(item), answers))
        at = self._items.add(item.set_name, item.uid, file, index, item.scenario_id)
        entry = Entry(
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
