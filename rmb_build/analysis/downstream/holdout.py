"""The releases the downstream check's prompts are held out from by default: the release each benchmark folder's
results.json scored, found from here and confirmed by its sha256 over items (``release_info.sha256``).

``rmb evaluate`` records the release as it was given (``release``, relative to the folder it ran in) and, for
a local release, its path from the results folder (``release_info.path_from_results``). Both are tried, the
first relative to this folder and to the results folder (``rmb``, the official release, as itself; a Hub id
only where ``prompts.holdout.releases`` names it); a release that cannot be found, or whose items
differ from the scored ones, is refused in one line: holding out nothing would score the benchmark's own
prompts as held out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.release.provenance import release_sha256

FIX = "set prompts.holdout.releases to its path (or to [] to hold out nothing)"


def _candidates(folder: str, spec: str, info: dict[str, Any]) -> list[str]:
    """Where the scored release may be, most specific first, each once."""
    out = []
    if isinstance(info.get("path_from_results"), str):
        out.append(os.path.normpath(Path(folder) / info["path_from_results"]))
    out.append(spec)
    if not Path(spec).is_absolute():
        out.append(os.path.normpath(Path(folder) / spec))
    return list(dict.fromkeys(out))


def scored_releases(benchmarks: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    """(where it was found, the opened release) of each distinct release the benchmarks scored."""
    from rmb_build.benchmarks.formats import RMB, format_names, open_release

    opened: dict[str, tuple[Any, str]] = {}  # resolved path or spec -> (release, its sha256)
    out: dict[str, tuple[str, Any]] = {}  # identity -> (where, release)
    for folder, results in benchmarks:
        spec = results.get("release")
        if not isinstance(spec, str) or not spec:
            raise RMBError(f"benchmarks: {folder}: results.json names no release; {FIX}")
        info = results.get("release_info") if isinstance(results.get("release_info"), dict) else {}
        want = info.get("sha256")
        fmt = info.get("format") if info.get("format") in format_names() else None
        problems, found = [], None
        for where in _candidates(folder, spec, info):
            local = Path(where).exists()
            if not local and where != RMB:  # a Hub id is not tried: "org/name" may as well be a missing folder
                problems.append(f"{where}: not found")
                continue
            key = str(Path(where).resolve()) if local else where
            if key not in opened:
                try:
                    release = open_release(where, fmt)
                except RMBError as exc:
                    opened[key] = (None, str(exc))
                else:
                    opened[key] = (release, release_sha256(release))
            release, sha = opened[key]
            if release is None:
                problems.append(f"{where}: unreadable ({sha})")
            elif want is None or sha == want:
                found = (where, release, sha)
                break
            else:
                problems.append(f"{where}: other items (sha256 {sha[:12]})")
        if found is None:
            scored = f"{spec!r}" + (f" (sha256 {str(want)[:12]})" if want else "")
            raise RMBError(
                f"benchmarks: {folder}: the release its results.json scored, {scored}, is not found from here "
                f"({'; '.join(problems)}); {FIX}"
            )
        where, release, sha = found
        out.setdefault(sha, (where, release))
    return list(out.values())
