"""Label sets: scenario labels annotators gave to a source's records, kept apart from the source.

A label set is a JSONL file, one record a line: ``{"source_id": ..., "scenario_id": ...}`` (other
fields are kept for the reader, e.g. each annotator's label). ``scenario_id`` is one of the 49 ids,
or null for a record that was reviewed and given no label (such lines only serve measurements).
An optional ``prompt_sha256`` (of the labelled prompt, stripped: ``prompt_digest``) makes the label
apply only to a query whose final user turn is that text, so a record gathered with other turns
(another ``max_turns``) or an id reused by another corpus never takes a label nobody gave it.
A source with ``labels: NAME-or-PATH`` gives each listed record that scenario; classification keeps
it, and it is the evidence a harmlessness label needs (``rmb_build.stages.harm_evidence``).

The sets shipped with rmb_build live in ``labels/`` beside this module, ``NAME.jsonl`` with a
``NAME.json`` saying how it was made (``annotated_by``: ``people``, ``llm`` or ``mixed``; ``annotators``: who they
were), and what was measured with it; adding one is adding those two files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from rmb_build.core.errors import InputError
from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.core.taxonomy import is_known

SHIPPED = "labels"


@dataclass(frozen=True)
class LabelSet:
    """``labels``: source id -> scenario id (only the lines that give one); ``reviewed``: every listed
    source id; ``about``: the shipped set's description (empty for a user's file); ``digest``: sha256."""

    name: str
    labels: dict[str, str]
    reviewed: frozenset[str]
    digest: str
    about: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)  # source id -> prompt_sha256, where given

    def label_of(self, source_id: str, prompt: str) -> str | None:
        """The scenario the set gives this record's query, or None (not labelled, or another prompt)."""
        scenario, labelled_prompt = self.labels.get(source_id), self.prompts.get(source_id)
        if scenario is None or (labelled_prompt is not None and labelled_prompt != prompt_digest(prompt)):
            return None
        return scenario


def prompt_digest(prompt: str) -> str:
    """``prompt_sha256``: the sha256 of the labelled prompt's text, stripped."""
    return hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def shipped_names() -> list[str]:
    """The names of the label sets shipped with rmb_build."""
    folder = resources.files(__package__).joinpath(SHIPPED)
    return sorted(p.name[: -len(".jsonl")] for p in folder.iterdir() if p.name.endswith(".jsonl"))


def _resolve(spec: str) -> tuple[str, Path, Path | None]:
    """(name, JSONL path, description path or None) of a shipped set's name or a file path."""
    if spec in shipped_names():
        folder = Path(str(resources.files(__package__).joinpath(SHIPPED)))
        return spec, folder / f"{spec}.jsonl", folder / f"{spec}.json"
    path = Path(spec).expanduser()
    if not path.is_file():
        known = ", ".join(shipped_names())
        raise InputError(spec, f"no such label set: neither a file nor a shipped set ({known})", field="labels")
    return f"file:{path.name}", path, None  # never the name of a shipped set


def load_label_set(spec: str) -> LabelSet:
    """The label set ``spec`` names (a shipped set's name or a JSONL path); a bad line raises
    InputError naming the file, line and field."""
    name, path, about_path = _resolve(spec)
    stat = path.stat()
    return _load(name, str(path), str(about_path) if about_path else None, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=8)
def _load(name: str, path: str, about_path: str | None, size: int, mtime_ns: int) -> LabelSet:
    labels: dict[str, str] = {}
    prompts: dict[str, str] = {}
    reviewed: set[str] = set()
    for line, row in read_jsonl_objects(path):
        sid = row.get("source_id")
        if not isinstance(sid, (str, int)) or isinstance(sid, bool):
            raise InputError(path, "'source_id' must be a string or an integer", line=line, field="source_id")
        sid = str(sid)
        if sid in reviewed:
            raise InputError(path, f"source id {sid!r} listed twice", line=line, field="source_id")
        scenario = row.get("scenario_id")
        if scenario is not None and not (isinstance(scenario, str) and is_known(scenario)):
            raise InputError(
                path, f"{scenario!r} is not one of the 49 scenario ids (or null)", line=line, field="scenario_id"
            )
        digest = row.get("prompt_sha256")
        if digest is not None and not (isinstance(digest, str) and len(digest) == 64):
            raise InputError(path, "must be a sha256 hex digest (64 characters)", line=line, field="prompt_sha256")
        reviewed.add(sid)
        if scenario is not None:
            labels[sid] = scenario
        if digest is not None:
            prompts[sid] = digest.lower()
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    about = json.loads(Path(about_path).read_text(encoding="utf-8")) if about_path else {}
    return LabelSet(name, labels, frozenset(reviewed), digest, about, prompts)


def identity(spec: str | None) -> object:
    """What a build's gather cache key holds for a source's ``labels``: the set's name and digest."""
    if spec is None:
        return None
    ls = load_label_set(spec)
    return {"name": ls.name, "sha256": ls.digest}


__all__ = ["LabelSet", "identity", "load_label_set", "prompt_digest", "shipped_names"]
