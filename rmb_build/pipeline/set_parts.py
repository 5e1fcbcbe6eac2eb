"""The build's sets on disk, one part per batch of queries, merged into release order when written.

``build_sets`` runs on each batch as soon as the batch is judged and guarded; its items and
annotations go to the run folder (one JSON Lines file per set and batch), so no list of every
answer or item of the build is ever held in memory. Each query lives in exactly one batch and a
batch's items come in release order (scenario, query id, then answer identities), so merging the
parts by (scenario, query id, position in its part) gives the order ``build_sets`` would give over
all queries at once: the same items, numbered the same way.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from rmb_build.core import atomic
from rmb_build.core.items import Item
from rmb_build.core.jsonl import iter_jsonl
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.release.rmb_format import parse_item
from rmb_build.stages.sets import SCENARIO_ORDER, SetsResult

SETS = (PAIRWISE_SET, BON_SET)


def part_path(folder: str | os.PathLike, batch: int, set_name: str) -> Path:
    """Where batch ``batch``'s items of ``set_name`` are kept."""
    return Path(folder) / f"{batch:05d}.{set_name}.jsonl"


def write_part(folder: str | os.PathLike, batch: int, result: SetsResult) -> None:
    """Keep one batch's items and annotations (atomically: a killed build leaves no half part)."""
    notes = {(n["set"], n["uid"]): n for n in result.annotations}
    for set_name, items in ((PAIRWISE_SET, result.pairwise), (BON_SET, result.bon)):
        atomic.write_jsonl(
            part_path(folder, batch, set_name),
            ({"item": it.to_rmb(), "note": notes.get((set_name, it.uid), {})} for it in items),
        )


def _records(path: Path, set_name: str) -> Iterator[tuple[tuple[int, str, int], Item, dict]]:
    for position, (line, rec) in enumerate(iter_jsonl(path)):
        note = rec["note"]
        item = parse_item(set_name, rec["item"], note["scenario"], str(path), line - 1)
        yield (SCENARIO_ORDER[item.scenario_id], note["query_id"], position), item, note


def merged(
    folder: str | os.PathLike, batches: Sequence[int], *, first_pair_uid: int = 0, first_bon_uid: int = 0
) -> Iterator[tuple[Item, dict]]:
    """Every kept item with its annotation, pairwise then BoN, in release order and numbered from
    ``first_pair_uid`` / ``first_bon_uid``: what ``build_sets`` over all the batches' queries gives."""
    for set_name, first in ((PAIRWISE_SET, first_pair_uid), (BON_SET, first_bon_uid)):
        parts = [_records(part_path(folder, b, set_name), set_name) for b in batches]
        for uid, (_, item, note) in enumerate(heapq.merge(*parts, key=lambda r: r[0]), start=first):
            item = replace(item, uid=str(uid))
            yield item, {**note, "uid": str(uid)}


def write_stage_part(folder: str | os.PathLike, stage: str, batch: int, records: Iterable[Any]) -> None:
    """Keep one batch's records of a stage on items (e.g. ``stages/style.py``'s variants), atomically."""
    atomic.write_jsonl(part_path(folder, batch, stage), (r.to_json() if hasattr(r, "to_json") else r for r in records))


def stage_parts(folder: str | os.PathLike, stage: str, batches: Sequence[int]) -> Iterator[dict[str, Any]]:
    """Every batch's kept records of a stage on items, batch by batch."""
    for b in batches:
        path = part_path(folder, b, stage)
        if path.exists():
            yield from (rec for _, rec in iter_jsonl(path))


def clear(folder: str | os.PathLike, keep: Iterable[int] = ()) -> None:
    """Remove the parts of batches not in ``keep`` (an earlier build's, with other batches)."""
    folder = Path(folder)
    kept = {part_path(folder, b, s).name for b in keep for s in SETS}
    for path in folder.glob("*.jsonl") if folder.is_dir() else ():
        if path.name not in kept:
            path.unlink()


__all__ = ["clear", "merged", "part_path", "stage_parts", "write_part", "write_stage_part"]
