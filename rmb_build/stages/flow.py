"""What the build hands from stage to stage: :class:`Flow` over the whole run, :class:`Batch` in one batch's
chain. A stage whose spec has a hook (``StageSpec.on_run``, ``on_batch``) reads its inputs from them and puts
its outputs there; the build (``pipeline/build.py``) only loops over the positions and keeps what the run
records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from rmb_build.core.records import Query, Response
from rmb_build.stages.spec import Entry

if TYPE_CHECKING:  # the runner's timed result is the pipeline's, a layer above
    from rmb_build.pipeline.executor import Timed
    from rmb_build.stages.sets import SetsResult

T = TypeVar("T")


def batched(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in batches of ``size`` (one empty batch for no items, so every stage still reports)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


@dataclass(frozen=True)
class ReleaseNote:
    """What a stage over the run adds to the release: its section of the manifest's ``checks`` (filled in as the
    release is written) and the fields it adds to each entry's annotations as the entries stream by."""

    check: str
    section: dict[str, Any]
    watch: Callable[[Iterator[Entry]], Iterator[Entry]]


@dataclass
class Flow:
    """The run's state between stages: the query pool (gathered, deduplicated, classified; emptied once the
    batches start), the selected queries, the manifest's checks, the run summary's figures, a plan's estimates,
    and what stages over the run add to the release."""

    queries: list[Query] = field(default_factory=list)
    classified: bool = False  # a classifier labelled the pool (harm evidence reads it)
    selected: list[Query] = field(default_factory=list)
    checks: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # the manifest's, by stage
    result: dict[str, object] = field(default_factory=dict)
    estimates: dict[str, int] = field(default_factory=dict)  # a dry run's: what the plan cannot count
    release_notes: list[ReleaseNote] = field(default_factory=list)

    def take_queries(self) -> list[Query]:
        """The pool, handed over (not kept here: a stage may spill it to disk and free it)."""
        queries, self.queries = self.queries, []
        return queries


@dataclass
class Batch:
    """One batch's chain: its queries (as the stages on queries left them), its answers (as the last stage on
    answers left them), its sets once built, and each stage's outcome under the stage's name."""

    index: int
    queries: list[Query]
    answers: list[Response] = field(default_factory=list)
    sets: SetsResult | None = None
    outcomes: dict[str, Timed] = field(default_factory=dict)
