"""RMB's item model: turns, answers, pairwise items, Best-of-N items, and the identity of their texts.

Records convert to and from RMB's JSON dicts with the official key order, so that reading and
writing an official file gives the same bytes (see ``release/``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, SET_FOLDERS


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
    """RMB's ``category_path`` of an item in ``scenario_id``'s file of set ``set_name``."""
    return f"{SET_FOLDERS[set_name]}/{scenario_id}"


def set_file(set_name: str, scenario_id: str) -> str:
    """The file of a set's scenario, relative to the release root: ``Pairwise_set/Harmlessness/S6.json``."""
    return f"{default_category_path(set_name, scenario_id)}.json"


def conversation_key(conversation: Sequence[Turn]) -> str:
    """Identity of a conversation: its turns' role and content (``language`` does not count)."""
    payload = json.dumps([[t.role, t.content] for t in conversation], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def text_key(conversation: Sequence[Turn], answer: str) -> str:
    """Identity of a text to score: (conversation, answer). Two items share a text when these are equal."""
    payload = json.dumps([[[t.role, t.content] for t in conversation], answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
