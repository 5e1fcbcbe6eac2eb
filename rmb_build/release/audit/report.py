"""An audit's report: the defects of every kind (``AuditReport``), the audit JSON and how a count is said."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmb_build.release.audit.kind import (
    KINDS,
    kind_names,
    removal_refs,
)

SCHEMA_VERSION = 1


@dataclass
class AuditReport:
    """Defects of one release: ``defects[kind]`` is a list of entries (dicts), every kind present."""

    release: str
    defects: dict[str, list[dict]] = field(default_factory=lambda: {k: [] for k in kind_names()})
    notes: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    shortcuts: dict[str, Any] | None = None  # ``rmb audit --shortcuts``: ``shortcuts.shortcut_table``

    @property
    def counts(self) -> dict[str, int]:
        known = kind_names()
        return {k: len(self.defects.get(k, [])) for k in (*known, *sorted(set(self.defects) - set(known)))}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def flagged_items(self) -> set[tuple[str, str, int]]:
        """(set, file, index) of every item that ``fix_release`` would remove or renumber."""
        return {
            (r["set"], r["file"], r["index"])
            for kind, entries in self.defects.items()
            for e in entries
            for r in removal_refs(kind, e) + ([e] if kind in KINDS and KINDS.get(kind).renumbers else [])
        }

    def summary(self) -> dict[str, Any]:
        """What a manifest or a dataset card records: counts, total, items flagged, notes."""
        out = {
            "counts": self.counts,
            "total": self.total,
            "items_flagged": len(self.flagged_items()),
            "notes": list(self.notes),
            "checks": dict(self.checks),
        }
        return out if self.shortcuts is None else {**out, "shortcuts": self.shortcuts}

    def to_json(self) -> dict[str, Any]:
        """The audit JSON: ``schema_version``, ``release``, ``counts`` (every kind), ``defects``, plus ``total``,
        ``items_flagged``, ``checks`` and ``notes`` (and ``shortcuts`` when that audit ran)."""
        out = {
            "schema_version": SCHEMA_VERSION,
            "release": self.release,
            "counts": self.counts,
            "total": self.total,
            "items_flagged": len(self.flagged_items()),
            "checks": self.checks,
            "notes": self.notes,
            "defects": {k: self.defects.get(k, []) for k in self.counts},
        }
        return out if self.shortcuts is None else {**out, "shortcuts": self.shortcuts}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AuditReport":
        defects: dict[str, list[dict[str, Any]]] = {k: [] for k in kind_names()}
        defects.update({k: list(v) for k, v in data.get("defects", {}).items()})
        return cls(
            release=data.get("release", ""),
            defects=defects,
            notes=list(data.get("notes", [])),
            checks=dict(data.get("checks", {})),
            shortcuts=data.get("shortcuts"),
        )


def defects_phrase(defects: int, items: int | None) -> str:
    """The one way a defect count is said: ``7 defects on 10 items`` (the items that ``fix_release``
    removes, which ``--skip-defective`` leaves out, or renumbers: a duplicate pair is one defect on one item)."""
    said = f"{defects} defect{'' if defects == 1 else 's'}"
    return said if items is None else f"{said} on {items} item{'' if items == 1 else 's'}"
