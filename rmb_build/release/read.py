"""Read a release: RMB's folder layout, or its Hugging Face form (a local folder or a Hub id)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from rmb_build.core.errors import InputError
from rmb_build.core.items import BonItem, Item, PairwiseItem, set_file
from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.core.paths import check_relative_id
from rmb_build.core.taxonomy import BON_SET, FOLDER_SETS, PAIRWISE_SET, is_known
from rmb_build.core.walk import ReadAccount, Seen, walk_files
from rmb_build.release.rmb_format import iter_set_file, load_json_object, parse_set_file
from rmb_build.release.style_set import STYLE_FOLDER, StyleRecord, read_style_set

ANNOTATIONS_FILE = "annotations.jsonl"
MANIFEST_FILE = "manifest.json"
AUDIT_FILE = "audit.json"  # the audit a build writes into its release (pipeline/release_step.py)


@dataclass
class Release:
    """A release in memory. ``files`` maps (set, scenario id) to that file's items in file order."""

    name: str
    root: Path | None
    files: dict[tuple[str, str], list[Item]] = field(default_factory=dict)
    manifest: dict | None = None
    source_format: str = "rmb"  # "rmb" or "hf"
    account: ReadAccount | None = None  # the files read and skipped, where the release came from files
    style: list[StyleRecord] = field(default_factory=list)  # Style_set/'s records (release/style_set.py)

    @property
    def pairwise(self) -> list[PairwiseItem]:
        return [it for (s, _), items in self.files.items() if s == PAIRWISE_SET for it in items]  # type: ignore[misc]

    @property
    def bon(self) -> list[BonItem]:
        return [it for (s, _), items in self.files.items() if s == BON_SET for it in items]  # type: ignore[misc]

    def items(self, set_name: str | None = None) -> Iterator[Item]:
        for (s, _), items in self.files.items():
            if set_name is None or s == set_name:
                yield from items

    def scenarios(self, set_name: str | None = None) -> list[str]:
        return [sc for (s, sc) in self.files if set_name is None or s == set_name]

    def file_of(self, item: Item) -> str:
        """The item's file relative to the release root: ``Pairwise_set/Harmlessness/S6.json``."""
        return set_file(item.set_name, item.scenario_id)

    def add(self, item: Item) -> None:
        self.files.setdefault((item.set_name, item.scenario_id), []).append(item)

    def read_summary(self) -> str:
        """One line on what was read: files, items and what was skipped (``ReadAccount.summary``)."""
        if self.account is not None:
            return self.account.summary()
        n = sum(len(items) for items in self.files.values())
        return f"read {n} item{'' if n == 1 else 's'} of {self.name} ({self.source_format} form)"

    def annotations(self) -> list[dict]:
        """Lines of ``annotations.jsonl`` (judge scores, guard labels, sources), if the release has them."""
        if self.root is None or not (self.root / ANNOTATIONS_FILE).exists():
            return []
        return [row for _, row in read_jsonl_objects(self.root / ANNOTATIONS_FILE)]


def find_rmb_root(path: Path) -> Path | None:
    """The folder holding ``Pairwise_set/`` or ``BoN_set/`` (``path`` itself or its ``RMB_dataset/``)."""
    for cand in (path, path / "RMB_dataset"):
        if any((cand / folder).is_dir() for folder in FOLDER_SETS):
            return cand
    return None


def refuse_a_set_folder(path: Path) -> None:
    """InputError when ``path`` is a set folder of a release or inside one (``RMB_dataset/Pairwise_set``),
    naming the release folder to pass instead."""
    here = path.resolve()
    for folder in (here, *list(here.parents)[:3]):
        if folder.name in FOLDER_SETS and find_rmb_root(folder.parent) is not None:
            above = folder.parent if path.is_absolute() else os.path.relpath(folder.parent)
            raise InputError(
                str(path), f"a set folder of a release, not a release: pass the release folder above it, {above}"
            )


# Files at the root that belong to a release without being set files (what a build, ``audit --fix`` and
# ``publish`` write beside the sets): read by whoever needs them, never reported as skipped.
RELEASE_FILES = (ANNOTATIONS_FILE, MANIFEST_FILE, AUDIT_FILE, "README.md", "removed.jsonl", "renumbered.jsonl")


def _set_files(path: Path, strict: bool) -> tuple[Path, list[tuple[str, str, Path, str]], list[Path], ReadAccount]:
    """RMB's root under ``path``, its set files as (set, scenario id, file, file relative to the root)
    in reading order (pairwise then BoN, each set's files by path; symbolic links followed, see
    ``core/walk.py``), the Style_set's files, and the account of every file seen: the set files, and what
    was skipped, with why."""
    root = find_rmb_root(path)
    if root is None:
        raise InputError(str(path), "not an RMB release: no Pairwise_set/ or BoN_set/ folder found")
    seen, skipped = walk_files(root)
    account = ReadAccount(str(root), skipped=skipped)
    by_set: dict[str, list[Seen]] = {name: [] for name in FOLDER_SETS.values()}
    style: list[Seen] = []
    for file in seen:
        top, _, rest = file.rel.partition("/")
        if not rest:
            if file.rel not in RELEASE_FILES:
                account.skipped.append((file.rel, "not in a set folder"))
        elif top == STYLE_FOLDER:  # style variants (release/style_set.py), read from the same walk
            if file.path.suffix == ".json":
                style.append(file)
            else:
                account.skipped.append((file.rel, "not a .json file"))
        elif top not in FOLDER_SETS:
            if file.path.suffix == ".json":
                raise InputError(str(root / top), f"unknown set folder {top!r} (expected {' or '.join(FOLDER_SETS)})")
            account.skipped.append((file.rel, "not in a set folder"))
        elif file.path.suffix != ".json":
            account.skipped.append((file.rel, "not a .json file"))
        else:
            by_set[FOLDER_SETS[top]].append(file)
    files = []
    for set_name, found in by_set.items():
        for file in found:
            scenario_id = file.rel.partition("/")[2].removesuffix(".json")
            try:
                check_relative_id(scenario_id)
            except ValueError as exc:
                raise InputError(file.rel, str(exc)) from None
            if strict and not is_known(scenario_id):
                raise InputError(
                    file.rel,
                    f"unknown scenario {scenario_id!r}: not one of RMB's 49 (run 'rmb audit' to inspect the release)",
                )
            files.append((set_name, scenario_id, file.path, file.rel))
            account.read.append(file.rel)
            account.linked += file.linked
    if not files:
        raise InputError(str(path), f"the release holds no set files ({account.summary()})")
    for file in style:
        account.read.append(file.rel)
        account.linked += file.linked
    return root, files, [file.path for file in style], account


def read_rmb_release(path: str | Path, strict: bool = True, name: str | None = None) -> Release:
    """Read RMB's layout. ``strict`` also rejects empty conversations, conversations that do not end
    with a user turn and unknown scenarios (use ``strict=False`` to audit such a release)."""
    path = Path(path)
    root, files, style_files, account = _set_files(path, strict)
    release = Release(name=name or path.resolve().name, root=root, account=account)
    for set_name, scenario_id, file, rel in files:
        items = parse_set_file(file, set_name, scenario_id, rel, strict)
        release.files[(set_name, scenario_id)] = items
        account.items += len(items)
    release.style = read_style_set(root, strict, style_files)
    if (root / MANIFEST_FILE).exists():
        release.manifest = load_json_object(root / MANIFEST_FILE, str(root / MANIFEST_FILE))
    return release


def iter_rmb_items(path: str | Path, strict: bool = True) -> Iterator[tuple[Item, str, int]]:
    """Each item of the release in RMB's layout at ``path`` as (item, its file relative to the root,
    its index in the file), in ``read_rmb_release``'s order, one item in memory at a time."""
    _, files, _, _ = _set_files(Path(path), strict)
    for set_name, scenario_id, file, rel in files:
        for index, item in enumerate(iter_set_file(file, set_name, scenario_id, rel, strict)):
            yield item, rel, index
