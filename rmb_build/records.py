"""Typed records for RMB items: turns, answers, pairwise items, Best-of-N items, and their texts.

Records convert to and from RMB's JSON dicts with the official key order, so that reading and
writing an official file gives the same bytes (see ``release/``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from .taxonomy import BON_SET, PAIRWISE_SET, SET_FOLDERS, parse_scenario_id


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    content: str
    language: str | None = None  # None: the turn had no ``language`` key

    def to_rmb(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content}
        if self.language is not None:
            out["language"] = self.language
        out["role"] = self.role
        return out

    def to_message(self) -> dict[str, str]:
        """The turn as an OpenAI / chat-template message."""
        return {"role": self.role, "content": self.content}


Conversation = tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Answer:
    llm_name: str
    answer: str

    def to_rmb(self) -> dict[str, Any]:
        return {"llm_name": self.llm_name, "answer": self.answer}


@dataclass(frozen=True, slots=True)
class PairwiseItem:
    """A chosen/rejected pair. ``scenario_id`` is where the item lives (its file), e.g. ``Harmlessness/S6``."""

    uid: str
    conversation: Conversation
    chosen: Answer
    rejected: Answer
    scenario_id: str
    category_path: str = ""
    set_name: str = field(default=PAIRWISE_SET, init=False)

    def answers(self) -> tuple[Answer, ...]:
        return (self.chosen, self.rejected)

    def to_rmb(self) -> dict[str, Any]:
        return {
            "pair_uid": self.uid,
            "conversation_input": [t.to_rmb() for t in self.conversation],
            "chosen": self.chosen.to_rmb(),
            "reject": self.rejected.to_rmb(),
            "category_path": self.category_path or default_category_path(PAIRWISE_SET, self.scenario_id),
        }


@dataclass(frozen=True, slots=True)
class BonItem:
    """One winner (``best``) against 2-6 ``losers``; an RM passes only if best outscores every loser."""

    uid: str
    conversation: Conversation
    best: Answer
    losers: tuple[Answer, ...]
    scenario_id: str
    category_path: str = ""
    set_name: str = field(default=BON_SET, init=False)

    def answers(self) -> tuple[Answer, ...]:
        return (self.best, *self.losers)

    def to_rmb(self) -> dict[str, Any]:
        return {
            "conversation_input": [t.to_rmb() for t in self.conversation],
            "bon_best": self.best.to_rmb(),
            "loser_list": [a.to_rmb() for a in self.losers],
            "bon_uid": self.uid,
            "category_path": self.category_path or default_category_path(BON_SET, self.scenario_id),
        }


Item = PairwiseItem | BonItem


def default_category_path(set_name: str, scenario_id: str) -> str:
    return f"{SET_FOLDERS[set_name]}/{scenario_id}"


def item_goal(item: Item) -> str:
    return parse_scenario_id(item.scenario_id).goal


def item_task_id(item: Item) -> str | None:
    return parse_scenario_id(item.scenario_id).task_id


def conversation_messages(conversation: Sequence[Turn]) -> list[dict[str, str]]:
    return [t.to_message() for t in conversation]


def prompt_text(conversation: Sequence[Turn]) -> str:
    """The last user turn: what a classifier or dedup step looks at."""
    for turn in reversed(conversation):
        if turn.role == "user":
            return turn.content
    return conversation[-1].content if conversation else ""


def conversation_key(conversation: Sequence[Turn]) -> str:
    """Identity of a conversation: its turns' role and content (``language`` does not count)."""
    payload = json.dumps([[t.role, t.content] for t in conversation], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def text_key(conversation: Sequence[Turn], answer: str) -> str:
    """Identity of a text to score: (conversation, answer). Two items share a text when these are equal."""
    payload = json.dumps([[[t.role, t.content] for t in conversation], answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ScoredText:
    """One unique (conversation, answer) text, the unit that reward models score."""

    key: str
    conversation: Conversation
    answer: str


def unique_texts(items: Iterable[Item]) -> Iterator[ScoredText]:
    """Every distinct (conversation, answer) text of ``items``, each once, in first-seen order."""
    seen: set[str] = set()
    for item in items:
        for ans in item.answers():
            key = text_key(item.conversation, ans.answer)
            if key not in seen:
                seen.add(key)
                yield ScoredText(key, item.conversation, ans.answer)


@dataclass(frozen=True, slots=True)
class Query:
    """A gathered query: a conversation that ends with a user turn, with where it came from.

    ``id`` is stable across runs (derived from the source and the source's own id), so stage caches
    and release uids stay stable. ``scenario_id`` is None until classified (or known from a release).
    """

    id: str
    conversation: Conversation
    source: str
    source_id: str
    language: str | None = None
    scenario_id: str | None = None
    confidence: float | None = None

    @property
    def prompt(self) -> str:
        return prompt_text(self.conversation)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversation": [t.to_rmb() for t in self.conversation],
            "source": self.source,
            "source_id": self.source_id,
            "language": self.language,
            "scenario_id": self.scenario_id,
            "confidence": self.confidence,
        }

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
        )


def query_id(source: str, source_id: str) -> str:
    """Stable id of a query from its source and the source's own id."""
    return hashlib.sha256(f"{source}\x00{source_id}".encode("utf-8")).hexdigest()[:16]


# --- Stage records: what generate, judge and guard produce, and what went wrong ----------------

def _record_json(rec: Any) -> dict[str, Any]:
    return {f: (list(v) if isinstance(v, tuple) else v)
            for f in rec.__dataclass_fields__ for v in (getattr(rec, f),)}


def _record_from_json(cls: type, d: dict[str, Any]) -> Any:
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
    input_chars_cut: int = 0       # characters of the conversation cut to fit the model's context
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
    judge: str = ""                # "<endpoint>/<model>"
    criteria: str = ""             # the criteria file used, relative to prompts/
    failed_samples: int = 0        # samples that stayed unparseable after re-asks

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
    guard: str = ""                # "<endpoint>/<model>"

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
