"""Where files go: data/raw/<name>/, data/release/<name>/, runs/<name>/ under a workdir, and the names
of what a build keeps in them (docs/files.md)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._ +\-()&,]")

# what a build keeps: in data/raw/<name>/, and in runs/<name>/
RAW_QUERIES = "queries.jsonl"
QUARANTINE = "quarantine.jsonl"
DEDUPED_QUERIES = "deduped.jsonl"
SELECTED_QUERIES = "selected.jsonl"
FAILURES_FILE = "failures.jsonl"
SUMMARY_FILE = "summary.json"
USAGE_FILE = "usage.json"


def workdir(explicit: str | os.PathLike | None = None) -> Path:
    """The folder that holds data/ and runs/: ``--workdir``, else $RMB_WORKDIR, else the current folder."""
    return Path(explicit or os.environ.get("RMB_WORKDIR") or Path.cwd()).resolve()


def raw_dir(name: str, base: str | os.PathLike | None = None) -> Path:
    return workdir(base) / "data" / "raw" / safe_name(name)


def release_dir(name: str, base: str | os.PathLike | None = None) -> Path:
    return workdir(base) / "data" / "release" / safe_name(name)


def run_dir(name: str, base: str | os.PathLike | None = None) -> Path:
    return workdir(base) / "runs" / safe_name(name)


def user_cache_dir() -> Path:
    """The user's cache folder for rmb (scores, downloaded releases, exported encoders):
    ``$XDG_CACHE_HOME/rmb``, or ``~/.cache/rmb``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmb"


def safe_name(name: str) -> str:
    """A single path component made from a user-given name (model, build, endpoint): no separators, no '..'."""
    cleaned = _UNSAFE.sub("_", str(name)).strip(" .")
    if not cleaned:
        raise ValueError(f"name {name!r} gives an empty file name")
    return cleaned[:120]


def check_relative_id(value: str, what: str = "scenario") -> str:
    """Validate an id made of '/'-separated names (a scenario id) before it is used as a path."""
    parts = value.split("/")
    if (
        not value
        or value.startswith("/")
        or "\\" in value
        or "\x00" in value
        or any(p in ("", ".", "..") or p != p.strip() for p in parts)
    ):
        raise ValueError(f"{what} {value!r} is not a safe relative path")
    return value


def prompts_dir() -> Path:
    """The shipped ``prompts/`` folder (inside the wheel as ``rmb_build.prompts``)."""
    return Path(str(resources.files("rmb_build.prompts")))


@dataclass(frozen=True)
class BuildPaths:
    raw: Path
    release: Path
    run: Path

    @property
    def results(self) -> Path:
        """Where Prefect persists each batch's result (``pipeline/prefect_tasks.py``)."""
        return self.run / "prefect-results"

    @property
    def batch_results(self) -> Path:
        """Where the in-process runner keeps each batch's result (``runner.LocalRunner``)."""
        return self.run / "batch-results"

    @property
    def llm_cache(self) -> Path:
        return self.run / "llm_cache"

    @property
    def embeddings(self) -> Path:
        """The build's embedding store (``rmb_build.embed.store``): each text embedded once per encoder."""
        return self.run / "embeddings"

    @property
    def sets(self) -> Path:
        """Each batch's pairwise and BoN items, until the release is written (``pipeline/set_parts.py``)."""
        return self.run / "sets"

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    @staticmethod
    def of(name: str, workdir: str | os.PathLike | None) -> "BuildPaths":
        return BuildPaths(raw_dir(name, workdir), release_dir(name, workdir), run_dir(name, workdir))
