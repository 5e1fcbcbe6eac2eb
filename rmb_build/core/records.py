"""Typed records of a build's stages: gathered queries, generated responses, judge scores, guard
labels, and what a stage could not do."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from rmb_build.core.items import Conversation, Turn
from rmb_build.core.text import last_user_turn

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


@dataclass(frozen=True, slots=True)
class Query:
    """A gathered query: a conversation that ends with a user turn, with where it came from.

    ``id`` is stable across runs (derived from the source and the source's own id), so stage caches
    and release uids stay stable. ``scenario_id`` is None until classified (or known from a release).
    ``labelled_by`` names the label set whose people gave ``scenario_id``: classification and goal
    routing keep such a label (``rmb_build.stages.sources.label_sets``).
    """

    id: str
    conversation: Conversation
    source: str
    source_id: str
    language: str | None = None
    scenario_id: str | None = None
    confidence: float | None = None
    labelled_by: str | None = None

    @property
    def prompt(self) -> str:
        return last_user_turn(self.conversation)

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "conversation": [t.to_rmb() for t in self.conversation],
            "source": self.source,
            "source_id": self.source_id,
            "language": self.language,
            "scenario_id": self.scenario_id,
            "confidence": self.confidence,
        }
        if self.labelled_by is not None:
            out["labelled_by"] = self.labelled_by
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Query":
        return Query(
            id=d["id"],
            conversation=tuple(Turn(t["role"], t["content"], t.get("language")) for t in d["conversation"]),
            source=d["source"],
            source_id=str(d["source_id"]),
            language=d.get("language"),
            scenario_id=d.get("scenario_id"),
            confidence=d.get("confidence"),
            labelled_by=d.get("labelled_by"),
        )


def query_id(source: str, source_id: str) -> str:
    """Stable id of a query from its source and the source's own id."""
    return hashlib.sha256(f"{source}\x00{source_id}".encode("utf-8")).hexdigest()[:16]


# --- Stage records: what generate, judge and guard produce, and what went wrong ----------------


def _record_json(rec: DataclassInstance) -> dict[str, Any]:
    return {f: (list(v) if isinstance(v, tuple) else v) for f in rec.__dataclass_fields__ for v in (getattr(rec, f),)}


_R = TypeVar("_R", bound="DataclassInstance")


def _record_from_json(cls: type[_R], d: dict[str, Any]) -> _R:
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in cls.__dataclass_fields__}
    return cls(**kw)


@dataclass(frozen=True, slots=True)
class Response:
    """One generated answer to a query. ``generator`` is the llm_name the release will show."""

    query_id: str
    generator: str
    model: str
    endpoint: str
    text: str
    finish_reason: str | None = None
    input_chars_cut: int = 0  # characters of the conversation cut to fit the model's context
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Response":
        return _record_from_json(Response, d)


@dataclass(frozen=True, slots=True)
class JudgeScore:
    """k pointwise judge samples (1-10) for one response; ``spread`` is their population std."""

    query_id: str
    generator: str
    scores: tuple[float, ...]
    mean: float
    spread: float
    rationales: tuple[str, ...]
    judge: str = ""  # "<endpoint>/<model>"
    criteria: str = ""  # the criteria file used, relative to prompts/
    failed_samples: int = 0  # samples that stayed unparseable after re-asks

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "JudgeScore":
        return _record_from_json(JudgeScore, d)


@dataclass(frozen=True, slots=True)
class GuardLabel:
    """A Llama-Guard verdict on a harmlessness prompt (``target="prompt"``, ``generator=None``) or on
    one response to it (``target="response"``). ``verdict`` is safe, unsafe or unknown (unparseable);
    for prompts, ``scenario_id`` is what the categories imply (``Harmlessness/S<n>`` or ``/multi``)."""

    query_id: str
    target: str
    generator: str | None
    verdict: str
    categories: tuple[str, ...] = ()
    scenario_id: str | None = None
    raw: str = ""
    guard: str = ""  # "<endpoint>/<model>"

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "GuardLabel":
        return _record_from_json(GuardLabel, d)


@dataclass(frozen=True, slots=True)
class Failure:
    """Something a stage could not do for one query (and generator); recorded, never raised."""

    stage: str
    query_id: str
    generator: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Failure":
        return _record_from_json(Failure, d)
