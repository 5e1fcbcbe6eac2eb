"""An LLM stage's plan: every request it will send, decided before any call.

Each LLM stage (generate, judge, guard, LLM classification) has ``prepare(...) -> Planned``,
``plan(...) -> list[ChatRequest]`` (the prepared requests) and ``collect(planned, results)``. The
build sends exactly the planned requests, and ``--dry-run``/``--max-cost`` estimate exactly them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rmb_build.core.records import Failure
from rmb_build.llm.types import ChatRequest

T = TypeVar("T")


@dataclass
class Planned(Generic[T]):
    """The requests, what each is for (``targets``, one per request or per group of requests), what
    cannot be asked at all (``failures``) and counts known before any call (``stats``)."""

    requests: list[ChatRequest] = field(default_factory=list)
    targets: list[T] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
