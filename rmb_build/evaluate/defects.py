"""The release's audit defects as ``evaluate`` reports them, and the items ``--skip-defective`` leaves out.

The audit runs without the embedding model (``near_duplicates=False``) so that it stays fast, and its result
is kept in the score cache's folder (``audits/``) under a key of what it reads: the release's content, each
file's items in order, its Style_set and the audit's code. A second evaluate of the release, with another RM
or cached scores, reads it back instead of auditing again (most of a cached evaluate's time otherwise).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
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


AUDITS = "audits"  # the folder under the score cache's


def audit_key(release: Release, content_sha256: str) -> str:
    """What the audit of ``release`` depends on: its items' content (``content_sha256``, the release's
    ``release_sha256``), the order of each file's items (a defect names its file and index), its Style_set
    and the code the audit runs."""
    from rmb_build.core.code_version import code_version
    from rmb_build.core.prompting import load_prompt
    from rmb_build.evaluate.style import style_sha256
    from rmb_build.release.audit.kinds.leaked_instruction import LEAK_PATTERNS_FILE

    # Each file's items in order, with the category path as stored (the content hash reads items through
    # to_rmb(), which fills in a missing one; category_mismatch flags it).
    order = [
        [set_name, scenario, [[str(it.uid), getattr(it, "category_path", None)] for it in items]]
        for (set_name, scenario), items in release.files.items()
    ]
    parts = [
        _audit_code(),
        code_version("rmb_build.release.audit.stream"),
        code_version(__name__),
        load_prompt(LEAK_PATTERNS_FILE),
        content_sha256,
        order,
        style_sha256(release.style) if release.style else None,
    ]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def _audit_code() -> str:
    """A hash of every module of the audit's package: its defect kinds are found by name at run time, so no
    import scan reaches them all."""
    import rmb_build.release.audit as package

    h = hashlib.sha256()
    root = Path(package.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _read_cached(path: Path) -> ReleaseDefects | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        kinds = {(str(f), int(i)): set(map(str, k)) for f, i, k in raw["kinds"]}
        return ReleaseDefects({str(k): int(v) for k, v in raw["counts"].items()}, kinds)
    except (OSError, ValueError, KeyError, TypeError):  # absent, or not whole: audit again
        return None


def _write_cached(path: Path, defects: ReleaseDefects) -> None:
    from rmb_build.core.atomic import write_json

    rows = [[f, i, sorted(k)] for (f, i), k in sorted(defects.kinds.items())]
    try:
        write_json(path, {"counts": defects.counts, "kinds": rows}, indent=None)
    except OSError:  # a read-only or full cache costs the next run the audit, never this one's results
        pass


def audit_defects(
    release: Release, cache_dir: str | Path | None = None, content_sha256: str | None = None
) -> ReleaseDefects:
    """Audit ``release`` (near-duplicate prompts not checked) and index the defective items; with
    ``cache_dir`` and the release's ``content_sha256``, the audit is read from (or kept in) its ``audits/``."""
    path = None
    if cache_dir is not None and content_sha256 is not None:
        path = Path(cache_dir) / AUDITS / f"{audit_key(release, content_sha256)}.json"
        cached = _read_cached(path)
        if cached is not None:
            return cached
    defects = _audit(release)
    if path is not None:
        _write_cached(path, defects)
    return defects


def _audit(release: Release) -> ReleaseDefects:
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
