"""What produced a result: the command line (redacted by ``core.redact``) and the release's identity."""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
from typing import Any, Callable

from rmb_build.core.redact import REDACTED, redact
from rmb_build.core.taxonomy import SETS
from rmb_build.release.read import Release


def command_line(command: str, args: argparse.Namespace, configure: Callable[[argparse.ArgumentParser], None]) -> str:
    """``rmb <command> ...`` that reproduces ``args``: positionals, then every option not at its default."""
    parser = argparse.ArgumentParser(add_help=False)
    configure(parser)
    words = ["rmb", command]
    for action in parser._actions:
        if action.dest not in vars(args):
            continue
        value = getattr(args, action.dest)
        if not action.option_strings:
            words += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        elif value != action.default:
            flag = max(action.option_strings, key=len)
            if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
                words.append(flag)
            else:
                words += [flag, str(value)]
    return shlex.join(redact(w) for w in words)


def release_sha256(release: Release) -> str:
    """sha256 of the release's items (their RMB form) in (set, scenario, uid) order, so that the order
    files are read in does not change it."""
    h = hashlib.sha256()
    rows = sorted(
        (
            (it.set_name, it.scenario_id, str(it.uid), json.dumps(it.to_rmb(), ensure_ascii=False, sort_keys=True))
            for it in release.items()
        ),
        key=lambda r: r[:3],
    )
    for row in rows:
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def release_record(release: Release, sha256: str | None = None) -> dict[str, Any]:
    """The release's name (its manifest's, else its folder's), form, item counts, content hash (``sha256``
    where the caller computed it already), and the audit summary its manifest holds (or None)."""
    manifest = release.manifest or {}
    return {
        "name": manifest.get("name") or release.name,
        "format": release.source_format,
        "items": {s: sum(1 for _ in release.items(s)) for s in SETS},
        "sha256": sha256 or release_sha256(release),
        "audit": manifest.get("audit") or None,
    }


__all__ = ["REDACTED", "command_line", "redact", "release_record", "release_sha256"]
