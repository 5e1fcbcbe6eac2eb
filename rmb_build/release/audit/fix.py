"""``--fix``: a copy of a release without the items an audit's defects make unusable, renumbered where a
kind renumbers, and the log of what changed.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict
from typing import Iterable

from rmb_build.core.errors import RMBError
from rmb_build.core.items import set_file
from rmb_build.release.audit.kind import (
    KINDS,
    kind_names,
    removal_refs,
)
from rmb_build.release.audit.report import AuditReport
from rmb_build.release.read import Release


def _kind_order(kind: str) -> tuple[int, str]:
    order = kind_names()
    return (order.index(kind) if kind in order else len(order), kind)


def fix_release(
    release: Release, report: AuditReport, kinds: Iterable[str] | None = None
) -> tuple[Release, list[dict]]:
    """A copy of ``release`` without the items the report's defects name, the items of a renumbering
    kind (``uid_collision``) under their new uid, and the log of what changed.

    ``kinds`` limits the fix to some defect kinds (all by default). Files left empty are dropped.
    Each log line: ``action`` (``removed`` or ``renumbered``, with ``new_uid``), set, uid, file, index,
    kinds, details, and the item as it was in RMB's form. The input release is not modified.
    """
    known = kind_names()
    kinds = list(known if kinds is None else kinds)
    unknown = [k for k in kinds if k not in report.defects and k not in known]
    if unknown:
        raise RMBError(f"unknown defect kind(s): {', '.join(unknown)} (known: {', '.join(known)})")
    files = {set_file(s, sc): (s, sc) for (s, sc) in release.files}

    def check(ref: dict) -> tuple[str, int]:
        key = files.get(ref["file"])
        items = release.files.get(key, []) if key else []
        if not (0 <= ref["index"] < len(items)) or items[ref["index"]].uid != ref["uid"]:
            raise RMBError(
                f"the audit report does not match release {release.name!r}: no item "
                f"uid {ref['uid']} at index {ref['index']} of {ref['file']}"
            )
        return ref["file"], ref["index"]

    reasons: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    renumber: dict[tuple[str, int], tuple[str, str, str]] = {}  # -> (new uid, kind, detail)
    for kind in kinds:
        for entry in report.defects.get(kind, []):
            if kind in KINDS and KINDS.get(kind).renumbers:
                renumber[check(entry)] = (str(entry["new_uid"]), kind, entry["detail"])
            for ref in removal_refs(kind, entry):
                reasons[check(ref)].append((kind, entry["detail"]))
    clean = Release(
        name=release.name, root=None, manifest=copy.deepcopy(release.manifest), source_format=release.source_format
    )
    log = []
    for (set_name, scenario_id), items in release.files.items():
        file = set_file(set_name, scenario_id)
        kept = []
        for index, item in enumerate(items):
            where = {"set": set_name, "uid": item.uid, "file": file, "index": index}
            why = reasons.get((file, index))
            if why is not None:
                kinds_of = sorted({k for k, _ in why}, key=_kind_order)
                details = list(dict.fromkeys(d for _, d in why))
                log.append({"action": "removed", **where, "kinds": kinds_of, "details": details, "item": item.to_rmb()})
                continue
            if (file, index) in renumber:
                new_uid, kind, detail = renumber[(file, index)]
                entry = {"action": "renumbered", **where, "new_uid": new_uid, "kinds": [kind], "details": [detail]}
                log.append({**entry, "item": item.to_rmb()})
                item = dataclasses.replace(item, uid=new_uid)
            kept.append(item)
        if kept or not items:
            clean.files[(set_name, scenario_id)] = kept
    return clean, log
