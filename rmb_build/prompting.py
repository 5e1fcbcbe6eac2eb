"""Prompt text lives in ``prompts/`` (shipped as ``rmb_build.prompts``); this module only loads it."""

from __future__ import annotations

import hashlib
from functools import lru_cache

from .paths import prompts_dir
from .taxonomy import parse_scenario_id


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
    """The criteria file for a scenario: ``criteria/<Task>/<Scenario>.md`` if present, else
    ``criteria/<Task>.md`` for helpfulness, ``criteria/Harmlessness.md`` for harmlessness."""
    sc = parse_scenario_id(scenario_id)
    candidates = []
    if sc.task:
        candidates += [f"criteria/{sc.task}/{sc.name}.md", f"criteria/{sc.task}.md"]
    candidates.append(f"criteria/{sc.goal}.md")
    for rel in candidates:
        if (prompts_dir() / rel).is_file():
            return rel
    raise FileNotFoundError(f"no evaluation criteria for scenario {scenario_id!r} (looked for {', '.join(candidates)})")


def criteria_for(scenario_id: str) -> str:
    """The scenario's evaluation criteria as text (used by judges and generative RMs)."""
    return load_prompt(criteria_path(scenario_id))
