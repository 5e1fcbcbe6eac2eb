"""Prompt text lives in ``prompts/`` (shipped as ``rmb_build.prompts``); this module only loads it."""

from __future__ import annotations

import hashlib
from functools import lru_cache

from rmb_build.core.paths import check_relative_id, prompts_dir


@lru_cache(maxsize=None)
def load_prompt(relpath: str) -> str:
    """The text of ``prompts/<relpath>``; FileNotFoundError names the missing file."""
    path = prompts_dir() / relpath
    if not path.is_file():
        raise FileNotFoundError(f"prompt file {relpath!r} not found in {prompts_dir()}")
    return path.read_text(encoding="utf-8")


def prompt_hash(relpath: str) -> str:
    """A short content hash of a prompt file: part of stage cache keys and the release manifest."""
    return hashlib.sha256(load_prompt(relpath).encode("utf-8")).hexdigest()[:16]


def criteria_path(scenario_id: str) -> str:
    """The scenario's own criteria file, ``criteria/<scenario id>.md`` (no fallback to a task or goal file);
    FileNotFoundError names the expected path when it is missing."""
    rel = f"criteria/{check_relative_id(scenario_id)}.md"
    if not (prompts_dir() / rel).is_file():
        raise FileNotFoundError(f"no evaluation criteria for scenario {scenario_id!r}: expected {prompts_dir() / rel}")
    return rel


def criteria_hash(scenario_id: str) -> str:
    """A short content hash of the scenario's criteria, for annotations to record what an item was judged with."""
    return prompt_hash(criteria_path(scenario_id))


def criteria_for(scenario_id: str) -> str:
    """The scenario's evaluation criteria as text (used by judges and generative RMs)."""
    return load_prompt(criteria_path(scenario_id))
