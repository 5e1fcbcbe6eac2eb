"""The official RMB release by name: downloaded once from its public repository's archive into the
user cache, checked against the checksums recorded then, and read offline afterwards.

The archive's ``RMB_dataset/`` folder is unpacked to ``$XDG_CACHE_HOME/rmb/releases/rmb/RMB_dataset/``
(``~/.cache`` without ``XDG_CACHE_HOME``) beside ``source.json``: the URL, the archive's sha256 and a
sha256 over the unpacked files. Everything is written in a temporary folder renamed into place at
the end, so an interrupted download leaves no release behind. ``RMB_RELEASE_URL`` replaces the URL.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from rmb_build.benchmarks.base import BenchmarkRelease
from rmb_build.core import atomic
from rmb_build.core.errors import RMBError
from rmb_build.core.redact import redact
from rmb_build.release.read import read_rmb_release

URL_ENV = "RMB_RELEASE_URL"
DEFAULT_URL = "https://github.com/Zhou-Zoey/RMB-Reward-Model-Benchmark/archive/refs/heads/main.zip"
DATASET_FOLDER = "RMB_dataset"
SOURCE_FILE = "source.json"
CHUNK = 1 << 20


def release_url() -> str:
    """Where the official release is downloaded from (``RMB_RELEASE_URL`` when set)."""
    return os.environ.get(URL_ENV) or DEFAULT_URL


def cache_dir(name: str = "rmb") -> Path:
    """``$XDG_CACHE_HOME/rmb/releases/<name>`` (``~/.cache/...`` without ``XDG_CACHE_HOME``)."""
    from rmb_build.core.paths import user_cache_dir

    return user_cache_dir() / "releases" / name


def tree_sha256(root: Path) -> str:
    """A sha256 over every file under ``root``: its relative path and its contents' sha256, in path order."""
    outer = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        inner = hashlib.sha256()
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                inner.update(chunk)
        outer.update(f"{file.relative_to(root).as_posix()}\0{inner.hexdigest()}\n".encode("utf-8"))
    return outer.hexdigest()


def _download(url: str, dest: Path) -> str:
    """Stream ``url`` into ``dest``; returns the sha256 of what was written."""
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as out:
            declared = resp.headers.get("Content-Length")
            for chunk in iter(lambda: resp.read(CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
        # http.client returns a body cut short by a closed connection without complaint
        if declared is not None and declared.isdigit() and size != int(declared):
            raise RMBError(
                f"cannot download the RMB release from {url}: the connection ended after {size} "
                f"of {declared} bytes (run the command again)"
            )
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise RMBError(
            f"cannot download the RMB release from {url}: {reason} (offline? set {URL_ENV} "
            f"to a reachable copy, or pass the release folder to --release)"
        ) from None
    return digest.hexdigest()


def _unpack(archive: Path, dest: Path, url: str) -> int:
    """Unpack the archive's ``RMB_dataset/`` folder (at its top or one folder down) into ``dest``."""
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile:
        raise RMBError(f"{url}: not a zip archive") from None
    count = 0
    with zf:
        for info in zf.infolist():
            parts = PurePosixPath(info.filename).parts
            if DATASET_FOLDER not in parts[:2] or info.is_dir():
                continue
            rel = parts[parts.index(DATASET_FOLDER) + 1 :]
            if not rel or any(p in ("..", "") or p.startswith("/") for p in rel):
                raise RMBError(f"{url}: unsafe path in the archive: {info.filename!r}")
            target = dest.joinpath(*rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
            count += 1
    if not count:
        raise RMBError(f"{url}: the archive has no {DATASET_FOLDER}/ folder")
    return count


def fetch_release(name: str = "rmb") -> tuple[Path, dict[str, Any]]:
    """The cached official release's ``RMB_dataset`` folder and its ``source.json``, downloading it the
    first time. A cached copy whose files no longer match the recorded checksum is an error."""
    home = cache_dir(name)
    source_file = home / SOURCE_FILE
    if home.exists():
        try:
            source = json.loads(source_file.read_text(encoding="utf-8"))
            recorded = source["tree_sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            raise RMBError(
                f"{home}: the cached RMB release has no valid {SOURCE_FILE}; delete {home} to download it again"
            ) from None
        found = tree_sha256(home / DATASET_FOLDER)
        if found != recorded:
            raise RMBError(
                f"{home / DATASET_FOLDER}: the cached RMB release does not match its recorded "
                f"checksum (sha256 {found[:12]}… != {recorded[:12]}…); delete {home} to download it again"
            )
        return home / DATASET_FOLDER, source
    url = release_url()
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=home.parent, prefix=f".{name}.tmp-"))
    try:
        archive = tmp / "archive.zip"
        archive_sha = _download(url, archive)
        files = _unpack(archive, tmp / DATASET_FOLDER, url)
        archive.unlink()
        source = {
            "url": redact(url),  # a signed link's token stays in the environment
            "archive_sha256": archive_sha,
            "tree_sha256": tree_sha256(tmp / DATASET_FOLDER),
            "files": files,
            "downloaded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        atomic.write_json(tmp / SOURCE_FILE, source)
        try:
            os.rename(tmp, home)
        except OSError:
            if not home.exists():
                raise
            return fetch_release(name)  # another process finished first: use (and check) its copy
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return home / DATASET_FOLDER, source


def official_release(strict: bool = True) -> BenchmarkRelease:
    """The official RMB release (see ``fetch_release``), read like any RMB folder; ``origin`` records
    where it came from."""
    root, source = fetch_release()
    release = read_rmb_release(root, strict=strict, name="rmb")
    return BenchmarkRelease(
        name=release.name,
        root=release.root,
        files=release.files,
        manifest=release.manifest,
        source_format=release.source_format,
        account=release.account,
        benchmark_format="rmb",
        origin={k: source[k] for k in ("url", "archive_sha256", "tree_sha256") if k in source},
    )


__all__ = ["DEFAULT_URL", "URL_ENV", "cache_dir", "fetch_release", "official_release", "release_url", "tree_sha256"]
