"""Turn built sets into a release folder: write it aside, read it back, audit it, add the manifest, swap it in.

The release appears under ``data/release/<name>/`` only once complete: it is written to a sibling
folder first, so a killed build never leaves a half-written release (nor stale scenario files from
an earlier build) where ``rmb evaluate`` would read it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .. import atomic
from ..config import BuildConfig
from .manifest import Accounting, build_manifest
from ..release.audit import audit_release
from ..release.read import MANIFEST_FILE, Release, read_release
from ..release.write import write_release

AUDIT_FILE = "audit.json"


def release_of(name: str, items: Iterable[Any]) -> Release:
    """A Release holding ``items`` (pairwise and BoN), grouped by set and scenario."""
    release = Release(name=name, root=None)
    for it in items:
        release.add(it)
    return release


def _swap_in(built: Path, target: Path) -> None:
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    built.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def write_built_release(cfg: BuildConfig, items: Iterable[Any], annotations: Iterable[dict], target: Path, *,
                        accounting: Accounting, stages: Iterable[Mapping[str, Any]], failures: Mapping[str, int],
                        usage: Any = None, near_duplicates: bool = True, checks: Mapping[str, Any] | None = None,
                        log: Callable[[str], None] = lambda _msg: None, embed: Any = None) -> dict[str, Any]:
    """Write the release to ``target`` with annotations, ``audit.json`` and ``manifest.json``; returns
    the manifest. The release is read back strictly (as ``rmb evaluate`` reads it) before it replaces
    whatever ``target`` held. ``embed``: what the audit embeds prompts with (the build's embedding
    store: its figures go into the manifest's ``embeddings``)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two builds of one name (sharing a run folder) would otherwise write into, or delete, each
    # other's .building folder: releases are assembled one at a time, under a lock on their parent
    # folder (no lock file left behind; the kernel releases it when a killed build's process dies).
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _write_audited(cfg, list(items), list(annotations), target, accounting=accounting, stages=stages,
                              failures=failures, usage=usage, near_duplicates=near_duplicates, checks=checks, log=log,
                              embed=embed)
    finally:
        os.close(fd)


def _write_audited(cfg: BuildConfig, items: list[Any], annotations: list[dict], target: Path, *, accounting: Accounting,
              stages: Iterable[Mapping[str, Any]], failures: Mapping[str, int], usage: Any, near_duplicates: bool,
              checks: Mapping[str, Any] | None,
              log: Callable[[str], None], embed: Any = None) -> dict[str, Any]:
    building = target.with_name(f".{target.name}.building")
    shutil.rmtree(building, ignore_errors=True)
    write_release(release_of(cfg.name, items), building, annotations=annotations)
    written = read_release(building)
    written.name = cfg.name
    log(f"release: {len(written.pairwise)} pairwise and {len(written.bon)} BoN items written; auditing")
    report = audit_release(written, near_duplicates=near_duplicates, embed=embed)
    atomic.write_json(building / AUDIT_FILE, report.to_json())
    manifest = build_manifest(cfg, written, accounting=accounting, stages=stages, failures=failures,
                              usage=usage, audit=report.summary(), checks=checks, embeddings=embed)
    atomic.write_json(building / MANIFEST_FILE, manifest)
    _swap_in(building, target)
    return manifest
