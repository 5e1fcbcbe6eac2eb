"""Every file under a folder, symbolic links followed, and the account a reader gives of them.

A release or a benchmark may be assembled from links, so links are followed wherever they point. A
link that leads back to a folder holding it (a loop) or to nothing is refused in one line, never
skipped. Hidden entries (names starting with ``.``) are not walked into; the account lists them as
skipped, as it lists every file a reader saw and did not read, with why.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from rmb_build.core.errors import InputError

HIDDEN = "hidden"


@dataclass(frozen=True)
class Seen:
    """A file met under the walked folder: ``path`` as reached (links not resolved), ``rel`` its POSIX
    path relative to that folder, ``linked`` whether a symbolic link (the file or a folder above it)
    led to it."""

    path: Path
    rel: str
    linked: bool


def walk_files(root: Path) -> tuple[list[Seen], list[tuple[str, str]]]:
    """Every file under ``root`` in path order, and the hidden or special entries not walked
    (relative path, why). InputError names a link loop, a broken link or a folder that cannot be listed."""
    files: list[Seen] = []
    skipped: list[tuple[str, str]] = []
    _walk(root, (), False, frozenset({os.path.realpath(root)}), files, skipped)
    return files, skipped


def _walk(
    folder: Path,
    parts: tuple[str, ...],
    linked: bool,
    ancestors: frozenset[str],
    files: list[Seen],
    skipped: list[tuple[str, str]],
) -> None:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise InputError(str(folder), f"cannot list the folder: {exc.strerror or exc}") from None
    for entry in entries:
        rel_parts = (*parts, entry.name)
        rel = "/".join(rel_parts)
        path = Path(entry.path)
        if entry.name.startswith("."):
            skipped.append((rel, HIDDEN))
            continue
        is_link = entry.is_symlink()
        if is_link:
            _check_link(path)
        if entry.is_dir():
            real = os.path.realpath(path)
            if real in ancestors:
                raise InputError(str(path), f"symbolic link loop: it leads back to {real}, a folder that holds it")
            _walk(path, rel_parts, linked or is_link, ancestors | {real}, files, skipped)
        elif entry.is_file():
            files.append(Seen(path, rel, linked or is_link))
        else:
            skipped.append((rel, "not a regular file"))


def _check_link(path: Path) -> None:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(str(path), "symbolic link loop: it leads back to itself") from None
        if exc.errno == errno.ENOENT:
            raise InputError(
                str(path), f"broken symbolic link: its target {os.readlink(path)!r} does not exist"
            ) from None
        raise InputError(str(path), f"cannot follow the symbolic link: {exc.strerror or exc}") from None


@dataclass
class ReadAccount:
    """What a reader did with the files it saw under ``where``: the files it ``read`` (relative paths),
    how many of them a symbolic link led to, the ``items`` read, and every file ``skipped`` with why."""

    where: str
    read: list[str] = field(default_factory=list)
    linked: int = 0
    items: int = 0
    records: int | None = None  # a benchmark table's records, where one record makes several items
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def summary(self, limit: int = 5) -> str:
        """One line: ``read 10 files (358 items) of DIR, 2 through symbolic links; skipped 1: x.txt (why)``."""
        n = len(self.read)
        items = f"{self.items} item{'' if self.items == 1 else 's'}"
        if self.records is not None:
            items = f"{self.records} record{'' if self.records == 1 else 's'}, {items}"
        said = f"read {n} file{'' if n == 1 else 's'} ({items}) of {self.where}"
        if self.linked:
            said += f", {self.linked} through symbolic links"
        if self.skipped:
            shown = ", ".join(f"{rel} ({why})" for rel, why in self.skipped[:limit])
            more = len(self.skipped) - limit
            said += f"; skipped {len(self.skipped)}: {shown}" + (f" and {more} more" if more > 0 else "")
        return said

    def to_json(self) -> dict:
        return {
            "files": len(self.read),
            "items": self.items,
            **({} if self.records is None else {"records": self.records}),
            "linked": self.linked,
            "skipped": [{"file": rel, "why": why} for rel, why in self.skipped],
        }


__all__ = ["HIDDEN", "ReadAccount", "Seen", "walk_files"]
