"""The release's audit defects as ``evaluate`` reports them, and the items ``--skip-defective`` leaves out.

The audit runs without the embedding model (``near_duplicates=False``) so that it stays fast.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from rmb_build.core.items import Item
from rmb_build.core.taxonomy import SET_FOLDERS
from rmb_build.release.read import Release


@dataclass
class ReleaseDefects:
    """``counts`` per kind (every kind, 0 when none); ``kinds`` per defective item, keyed (file, index)."""

    counts: dict[str, int]
    kinds: dict[tuple[str, int], set[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"counts": self.counts, "items": len(self.kinds), "near_duplicates_checked": False}


def audit_defects(release: Release) -> ReleaseDefects:
    """Audit ``release`` (near-duplicate prompts not checked) and index the defective items."""
    from rmb_build.release.audit import audit_release, removal_refs

    report = audit_release(release, near_duplicates=False)
    kinds: dict[tuple[str, int], set[str]] = defaultdict(set)
    for kind, entries in report.defects.items():
        for e in entries:
            for ref in removal_refs(kind, e):  # the items `rmb audit --fix` removes: one count of items
                kinds[(ref["file"], ref["index"])].add(kind)
    return ReleaseDefects({k: len(v) for k, v in report.defects.items()}, dict(kinds))


def split_items(release: Release, defects: ReleaseDefects | None) -> tuple[list[Item], dict[str, Any] | None]:
    """The items to score and, when ``defects`` is given, ``{"n", "kinds": {kind: items}}`` of those left out."""
    kept: list[Item] = []
    skipped: Counter[str] = Counter()
    n = 0
    for (set_name, scenario_id), items in release.files.items():
        file = f"{SET_FOLDERS[set_name]}/{scenario_id}.json"
        for index, item in enumerate(items):
            found = defects.kinds.get((file, index)) if defects else None
            if found:
                n += 1
                skipped.update(found)
            else:
                kept.append(item)
    return kept, ({"n": n, "kinds": dict(sorted(skipped.items()))} if defects else None)
