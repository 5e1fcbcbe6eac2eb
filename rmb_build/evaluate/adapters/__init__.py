"""Reward-model adapters: one module per RM kind, found by name.

An RM spec is ``<kind>:<target>`` (``hf:./my-rm``, ``baseline:length``). The kind names a module of
this package that registers a ``RewardModel`` subclass under that kind (``ADAPTERS.add(kind, cls)``),
built as ``cls(target, options)``; adding a kind of RM is adding one file. Only the spec's module is
imported (a heavy kind costs nothing until used). Modules starting with ``_`` are helpers, not kinds.

Two shapes of RM exist:
- a ``RewardModel`` scores one (conversation, answer) text at a time (``score_stream``);
- a ``PairJudge`` (a ``RewardModel`` with ``compares_pairs = True``) says which of two answers is
  better (``judge_stream``); generative RMs in pairwise mode are judges.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Conversation
from rmb_build.core.redact import redact
from rmb_build.core.registry import Registry
from rmb_build.evaluate.rm_options import RMOptions

ADAPTERS: Registry[type[RewardModel]] = Registry("RM kind", __name__)


@dataclass(frozen=True)
class ScoreText:
    """One unique text to score. ``scenario_id`` is set only for RMs whose score depends on it
    (``per_scenario``: a generative RM given the scenario's criteria); it is None otherwise."""

    key: str
    conversation: Conversation
    answer: str
    scenario_id: str | None = None


@dataclass(frozen=True)
class JudgePair:
    """Two answers to one conversation; ``scenario_id`` selects the criteria where they are used."""

    key: str
    conversation: Conversation
    first: str
    second: str
    scenario_id: str


class RewardModel:
    """Base class: subclasses set ``kind`` and implement ``describe`` and ``score_batch`` (or ``score_stream``)."""

    kind = ""
    compares_pairs = False  # True for PairJudge
    per_scenario = False  # True when a score depends on the item's scenario, not only on the text

    def __init__(self, target: str, options: RMOptions):
        self.target, self.options = target, options
        self.stats: dict[str, Any] = {}  # reported in results.json under "scoring" (e.g. truncated texts)

    @property
    def spec(self) -> str:
        """``kind:target`` redacted (``core.redact``): what every writer and message shows. The target
        itself, credentials and all, stays with the adapter, which uses it."""
        return redact(f"{self.kind}:{self.target}")

    @classmethod
    def check_target(cls, target: str) -> None:
        """Raise RMBError for a target this kind can never score (a cheap check, no model loaded): run
        before any release is read."""

    def describe(self) -> dict[str, Any]:
        """What determines the scores (model identity, options that change them): the fingerprint's input."""
        raise NotImplementedError

    def fingerprint(self) -> str:
        """A hash of ``describe()``: the score cache's key for this RM."""
        payload = json.dumps({"kind": self.kind, **self.describe()}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def score_batch(self, texts: Sequence[ScoreText]) -> list[float]:
        raise NotImplementedError

    def score_stream(self, texts: Sequence[ScoreText]) -> Iterator[tuple[list[int], Sequence[float | None]]]:
        """Scores as they are ready: ``(indices into texts, scores)`` per batch, in any order (None: a text this
        run could not score, as ``cacheable`` says)."""
        bs = max(1, self.options.batch_size)
        for start in range(0, len(texts), bs):
            idx = list(range(start, min(start + bs, len(texts))))
            yield idx, self.score_batch([texts[i] for i in idx])

    def system_turn_handling(self) -> str:
        """What this RM does with a conversation's leading system turn (results.json's ``system_first_handling``)."""
        return "passed to the RM as it is, a system turn first"

    def cacheable(self, value: object) -> bool:
        """Whether a value may go to the score cache (None: this run could not score the unit)."""
        return value is not None

    def close(self) -> None:
        """Free what the RM holds (a model, a client); called once scoring is over."""


class PairJudge(RewardModel):
    """An RM that compares two answers. ``judge_stream`` yields, per pair, the votes of each order:
    ``{"ab": [1 if the first answer won else 0 ...], "ba": [same with the order swapped]}``."""

    compares_pairs = True

    def judge_stream(self, pairs: Sequence[JudgePair]) -> Iterator[tuple[list[int], list[dict]]]:
        raise NotImplementedError


def available_kinds() -> list[str]:
    """The RM kinds, one per module, listed without importing any."""
    return ADAPTERS.module_names()


def parse_spec(spec: str) -> tuple[str, str]:
    kind, sep, target = spec.partition(":")
    if not sep or not kind or not target:
        raise RMBError(f"--rm {redact(spec)!r}: expected KIND:TARGET (kinds: {', '.join(available_kinds())})")
    if kind not in available_kinds():
        raise RMBError(f"--rm {redact(spec)!r}: unknown RM kind {kind!r} (kinds: {', '.join(available_kinds())})")
    return kind, target


def check_rm(spec: str) -> None:
    """Refuse a bad ``--rm`` (its shape, its kind, the kind's ``check_target``) before any work."""
    kind, target = parse_spec(spec)
    ADAPTERS.load(kind)
    ADAPTERS.get(kind, field="--rm").check_target(target)


def load_rm(spec: str, options: RMOptions | None = None) -> RewardModel:
    """The adapter for ``spec``; models load lazily, on the first text that needs scoring."""
    kind, target = parse_spec(spec)
    ADAPTERS.load(kind)
    return ADAPTERS.get(kind, field="--rm")(target, options or RMOptions())
