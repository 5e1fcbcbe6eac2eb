"""What produced a result: the command line (secret-looking values redacted) and the release's identity."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

from rmb_build.core.taxonomy import SETS
from rmb_build.release.read import Release

REDACTED = "<redacted>"
# API keys and tokens as providers spell them, and key=value pairs whose name says "secret".
_TOKEN = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,})")
_SECRET_PAIR = re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|token|secret|password|passwd)=)[^&\s]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s,]+")


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = REDACTED if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment and REDACTED))


def redact(value: str) -> str:
    """``value`` with URL credentials and query strings, API-key-looking tokens and secret=... pairs redacted."""
    value = _URL.sub(lambda m: _redact_url(m.group(0)), value)
    value = _SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, value)
    return _TOKEN.sub(REDACTED, value)


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


def release_record(release: Release) -> dict[str, Any]:
    """The release's name (its manifest's, else its folder's), form, item counts, content hash, and the
    audit summary its manifest holds (or None)."""
    manifest = release.manifest or {}
    return {
        "name": manifest.get("name") or release.name,
        "format": release.source_format,
        "items": {s: sum(1 for _ in release.items(s)) for s in SETS},
        "sha256": release_sha256(release),
        "audit": manifest.get("audit") or None,
    }
