"""What a copy of a release carries besides the set files it writes itself: ``Style_set/`` and every other
file of the source (``audit.json``, a card, notes), byte for byte, so that nothing the copy's maker read
is dropped.

A style file is rewritten only where it holds records of removed items, or records the audit found that
``rmb evaluate`` refuses (``unusable``: an orphan, a repeated id, a file of an unknown scenario): those records
go (a renumbered item's records stay with its uid's first holder, as its annotations do), and a file left
with no record goes too. A release read in
its Hugging Face form has no files to carry: its style records are written as ``Style_set/`` files.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

from rmb_build.core import atomic
from rmb_build.core.taxonomy import FOLDER_SETS, PAIRWISE_SET
from rmb_build.core.walk import walk_files
from rmb_build.release.read import Release
from rmb_build.release.rmb_format import load_json_file
from rmb_build.release.style_set import STYLE_FOLDER, record_from_row, style_file, style_row

# the audit's style kinds whose records 'rmb evaluate' refuses (release/style_set.py's strict reading): a
# cleaned copy leaves them out, so that it evaluates
STYLE_REFUSED = ("style_orphan", "style_unknown_scenario", "style_repeated_id")


@dataclass
class Carried:
    """The account of what a copy carried: files copied byte for byte, style files rewritten without the
    records of removed items, and how many records went."""

    copied: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    style_removed: int = 0
    style_unusable: int = 0  # of style_removed: records 'rmb evaluate' refuses, not of removed items
    dropped: list[str] = field(default_factory=list)  # style files left with no record

    def __bool__(self) -> bool:
        return bool(self.copied or self.rewritten or self.style_removed or self.dropped)

    def to_json(self) -> dict[str, Any]:
        return {
            "copied": self.copied,
            "rewritten": self.rewritten,
            "style_records_removed": self.style_removed,
            "style_records_unusable": self.style_unusable,
            "dropped": self.dropped,
        }

    def summary(self) -> str:
        in_style = [f.startswith(f"{STYLE_FOLDER}/") for f in self.copied]
        copied, rewritten = sum(in_style), len(self.rewritten)
        other = [f for f, style in zip(self.copied, in_style) if not style]
        parts = []
        if copied or rewritten or self.style_removed or self.dropped:
            said = f"{copied} byte for byte" + (f", {rewritten} rewritten" if rewritten else "")
            if self.dropped:
                said += f", {len(self.dropped)} dropped"
            if self.style_removed - self.style_unusable:
                said += f"; {self.style_removed - self.style_unusable} records of removed items dropped"
            if self.style_unusable:
                said += f"; {self.style_unusable} records 'rmb evaluate' refuses dropped"
            parts.append(f"{STYLE_FOLDER}/ ({said})")
        if other:
            parts.append(", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else ""))
        return "carried " + "; ".join(parts)


def _is_set_file(rel: str) -> bool:
    top, _, rest = rel.partition("/")
    return top in FOLDER_SETS and bool(rest) and rel.endswith(".json")


def _key(raw: object) -> tuple[str, str] | None:
    if not isinstance(raw, dict) or isinstance(raw.get("id"), (bool, type(None))):
        return None
    return str(raw.get("set", PAIRWISE_SET)), str(raw["id"])


def carry_parts(
    source: Release,
    dest: Path,
    rewritten: Collection[str],
    removed: Collection[tuple[str, str]],
    unusable: Collection[tuple[str, int]] = (),
) -> Carried:
    """Copy into ``dest`` every file of ``source`` that is not a set file nor one of ``rewritten`` (root
    files the copy writes itself); ``removed``: the (set, uid) of items the copy dropped and no kept item holds;
    ``unusable``: the (file, index) of style records to leave out whatever their item."""
    carried = Carried()
    removed, unusable = set(removed), set(unusable)
    if source.root is None:
        _write_style(source, dest, carried, removed, unusable)
        return carried
    seen, _hidden = walk_files(source.root)
    for file in seen:
        if _is_set_file(file.rel) or file.rel in rewritten:
            continue
        target = dest / file.rel
        if file.rel.startswith(f"{STYLE_FOLDER}/") and file.rel.endswith(".json") and (removed or unusable):
            records = load_json_file(file.path, file.rel)
            if isinstance(records, list):
                bad = {i for i in range(len(records)) if (file.rel, i) in unusable}
                kept = [r for i, r in enumerate(records) if i not in bad and _key(r) not in removed]
                if len(kept) < len(records):
                    carried.style_removed += len(records) - len(kept)
                    carried.style_unusable += len(bad)
                    if kept:
                        atomic.write_json(target, kept)
                        carried.rewritten.append(file.rel)
                    else:
                        carried.dropped.append(file.rel)
                    continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file.path, target)
        carried.copied.append(file.rel)
    return carried


def _write_style(
    source: Release, dest: Path, carried: Carried, removed: set[tuple[str, str]], unusable: set[tuple[str, int]]
) -> None:
    by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in source.style:
        if (rec.file, rec.index) in unusable:
            carried.style_removed += 1
            carried.style_unusable += 1
        elif (rec.set_name, rec.id) in removed:
            carried.style_removed += 1
        else:
            by_file[style_file(rec.scenario_id)].append(record_from_row(style_row(rec)))
    for rel, records in by_file.items():
        atomic.write_json(dest / rel, records)
        carried.rewritten.append(rel)


def removed_keys(source: Release, clean: Release) -> set[tuple[str, str]]:
    """The (set, uid) of ``source``'s items that ``clean`` no longer holds under any item."""
    kept = {(it.set_name, str(it.uid)) for it in clean.items()}
    return {(it.set_name, str(it.uid)) for it in source.items()} - kept


__all__ = ["STYLE_REFUSED", "Carried", "carry_parts", "removed_keys"]
