"""Write a release in RMB's exact layout: one JSON file per (set, scenario), plus annotations and manifest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from rmb_build.core import atomic
from rmb_build.core.items import Item, set_file
from rmb_build.core.paths import check_relative_id
from rmb_build.release.read import ANNOTATIONS_FILE, MANIFEST_FILE, Release
from rmb_build.release.rmb_format import EMPTY_FILE, FILE_END, FILE_START, ITEM_SEPARATOR, dumps_element


def write_set_file(path: str | os.PathLike, items: Iterable[Item]) -> int:
    """Write one set file atomically, item by item (one item in memory at a time); returns the count.

    The bytes are ``dumps_items(list(items))``'s: RMB's ``json.dumps(items, indent=1, ensure_ascii=False)``.
    """
    count = 0
    with atomic.open_atomic(path) as fh:
        for item in items:
            fh.write(((ITEM_SEPARATOR if count else FILE_START) + dumps_element(item)).encode("utf-8"))
            count += 1
        fh.write((FILE_END if count else EMPTY_FILE).encode("utf-8"))
    return count


def write_release(
    release: Release, root: str | os.PathLike, annotations: Iterable[dict] | None = None, manifest: dict | None = None
) -> list[Path]:
    """Write every set file of ``release`` under ``root`` atomically; returns the files written.

    Files are byte-identical to RMB's: ``json.dumps(items, indent=1, ensure_ascii=False)``, no newline.
    """
    root = Path(root)
    written = []
    for (set_name, scenario_id), items in release.files.items():
        check_relative_id(scenario_id)
        path = root / set_file(set_name, scenario_id)
        write_set_file(path, items)
        written.append(path)
    if annotations is not None:
        atomic.write_jsonl(root / ANNOTATIONS_FILE, annotations)
    if manifest is not None:
        atomic.write_json(root / MANIFEST_FILE, manifest)
    return written
