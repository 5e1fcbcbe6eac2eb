"""Turn built sets into a release folder: write it aside item by item, read it back and audit it as
it streams, add the manifest, swap it in.

The release appears under ``data/release/<name>/`` only once complete: it is written to a sibling
folder first, so a killed build never leaves a half-written release (nor stale scenario files from
an earlier build) where ``rmb evaluate`` would read it. No stage holds the release in memory: items
flow through one at a time, and what outlives an item is a few small fields and digests of its texts.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from rmb_build.core import atomic
from rmb_build.core.errors import RMBError
from rmb_build.core.items import Item, set_file
from rmb_build.core.memory import HeapTrimmer
from rmb_build.core.paths import check_relative_id
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.manifest import Accounting, ReleaseFigures, build_manifest
from rmb_build.release.audit import StreamingAudit
from rmb_build.release.audit.shortcuts import ShortcutTally
from rmb_build.release.read import ANNOTATIONS_FILE, AUDIT_FILE, MANIFEST_FILE, Release, iter_rmb_items
from rmb_build.release.write import write_set_file

if TYPE_CHECKING:
    from rmb_build.embed.store import EmbeddingStore

# The release streams every item twice (written, read back and audited) through a build's large,
# trimmed heap: its short-lived blocks land all over it, so the heap is trimmed as it goes once
# resident memory grew this much (looked at every TRIM_CHECK_ITEMS items).
RELEASE_HEADROOM_MB = 16
TRIM_CHECK_ITEMS = 256

Entry = tuple[Item, Mapping[str, Any] | None]  # an item and its line of annotations.jsonl (None: no line)


def release_of(name: str, items: Iterable[Any]) -> Release:
    """A Release holding ``items`` (pairwise and BoN), grouped by set and scenario."""
    release = Release(name=name, root=None)
    for it in items:
        release.add(it)
    return release


def entries_of(items: Iterable[Item], annotations: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """``write_built_release``'s entries from lists: the items grouped by file (files in order of first
    appearance), each with the annotation of its (set, uid)."""
    notes = {(n.get("set"), str(n.get("uid"))): n for n in annotations}
    return [(it, notes.get((it.set_name, it.uid))) for it in release_of("", items).items()]


def _swap_in(built: Path, target: Path) -> None:
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    built.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def write_built_release(
    cfg: BuildConfig,
    entries: Iterable[Entry],
    target: Path,
    *,
    accounting: Accounting,
    stages: Iterable[Mapping[str, Any]],
    failures: Mapping[str, int],
    usage: object = None,
    near_duplicates: bool = True,
    checks: Mapping[str, Any] | None = None,
    log: Callable[[str], None] = lambda _msg: None,
    embed: EmbeddingStore | None = None,
    more_files: Callable[[Path], None] | None = None,
) -> dict[str, Any]:
    """Write the release to ``target`` with annotations, ``audit.json`` and ``manifest.json``; returns
    the manifest. ``entries``: (item, annotation or None) pairs, consumed once, lazily; items are
    numbered already and each (set, scenario) file's items come together (``entries_of`` groups lists).
    The release is read back strictly (as ``rmb evaluate`` reads it) and audited item by item before
    it replaces whatever ``target`` held. ``embed``: what the audit embeds prompts with (the build's
    embedding store: its figures go into the manifest's ``embeddings``). ``more_files(folder)`` writes what
    else the release holds (``Style_set/``) once the sets are written, before the audit."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _one_at_a_time(target.parent):
        building = target.with_name(f".{target.name}.building")
        shutil.rmtree(building, ignore_errors=True)
        figures = ReleaseFigures()
        trim = HeapTrimmer(RELEASE_HEADROOM_MB, every=TRIM_CHECK_ITEMS)
        written = _write_files(entries, building, figures, trim)
        if more_files is not None:
            more_files(building)
        log(f"release: {written['pairwise']} pairwise and {written['bon']} BoN items written; auditing")
        audit = StreamingAudit(cfg.name, near_duplicates=near_duplicates, embed=embed)
        shortcuts = ShortcutTally()  # a built release is audited for trivial-scorer shortcuts before it is published
        for item, file, index in iter_rmb_items(building):  # strict, as `rmb evaluate` reads it
            audit.add(item, file, index)
            shortcuts.add(item)
            trim()
        report = audit.report()
        report.shortcuts = shortcuts.table()
        atomic.write_json(building / AUDIT_FILE, report.to_json())
        manifest = build_manifest(
            cfg,
            figures,
            accounting=accounting,
            stages=stages,
            failures=failures,
            usage=usage,
            audit=report.summary(),
            checks=checks,
            embeddings=embed,
        )
        atomic.write_json(building / MANIFEST_FILE, manifest)
        _swap_in(building, target)
        return manifest


@contextlib.contextmanager
def _one_at_a_time(folder: Path) -> Iterator[None]:
    """Two builds of one name (sharing a run folder) would otherwise write into, or delete, each other's
    .building folder: releases are assembled one at a time, under a lock on their parent ``folder`` (no lock
    file left behind; the kernel releases it when a killed build's process dies)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _by_file(entries: Iterable[Entry]) -> Iterator[tuple[tuple[str, str], Iterator[Entry]]]:
    """The entries file by file, lazily; a file whose items reappear after another file's is an error."""
    done: set[tuple[str, str]] = set()
    for key, group in itertools.groupby(entries, key=lambda e: (e[0].set_name, e[0].scenario_id)):
        if key in done:
            raise RMBError(
                f"release items of {set_file(*key)} are not together: more of them came after "
                f"another file's items (group each file's items)"
            )
        done.add(key)
        yield key, group


def _write_files(
    entries: Iterable[Entry], building: Path, figures: ReleaseFigures, trim: Callable[[], None] = lambda: None
) -> Counter:
    """Write the set files and ``annotations.jsonl`` into ``building``, feeding ``figures``; items per
    set. ``trim`` is called once an item."""
    written: Counter = Counter()

    def items(group: Iterator[Entry], notes: IO[bytes]) -> Iterator[Item]:
        for item, note in group:
            trim()
            figures.add(item, note)
            if note is not None:
                notes.write((json.dumps(note, ensure_ascii=False) + "\n").encode("utf-8"))
            yield item

    with atomic.open_atomic(building / ANNOTATIONS_FILE) as notes:
        for (set_name, scenario_id), group in _by_file(entries):
            check_relative_id(scenario_id)
            written[set_name] += write_set_file(building / set_file(set_name, scenario_id), items(group, notes))
    return written
