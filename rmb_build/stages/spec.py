"""What a build stage declares about itself: one :class:`StageSpec` at the end of its module.

The pipeline reads the ordered specs (``rmb_build.pipeline.stages.STAGES``) and does the rest the same
way for every stage: the cache key from what the spec says it reads (``pipeline/keys.stage_key``),
the cache, the timing and the run's stamp (``pipeline/executor.py``), the Prefect task
(``pipeline/prefect_tasks.py``), the run summary under the spec's name. A stage's work function only does the
stage's work: ``work(env, *inputs)``, sync (CPU, on the task runner's pool) or async (LLM calls in the
flow's event loop), with :class:`StageEnv` holding what the run hands it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Generic,
    Iterable,
    Iterator,
    Mapping,
    Protocol,
    Sequence,
    TypeVar,
)

from rmb_build.core.items import Item
from rmb_build.core.records import Failure
from rmb_build.embed.encoder import store_for
from rmb_build.llm.types import ChatClient
from rmb_build.stages.options import EmbeddingsConfig

if TYPE_CHECKING:  # the build config and run are the pipeline's, a layer above
    from rmb_build.embed.store import EmbeddingStore
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Batch, Flow


class Position(Enum):
    """Where a stage runs, in build order: ``pipeline/build.py`` loops over the positions and runs every stage
    listed at one through its hook (``on_run``, ``on_batch``) or the position's own step (key, runner, progress,
    record). Its work's inputs and what its result's ``records`` are:

    - ``POOL``: over the whole pool of queries, before selection (gather, dedup, classify, harm evidence,
      select): its ``on_run`` hook reads and sets ``Flow.queries`` (and ``Flow.selected``);
    - ``RUN``: once over the whole run's selected queries, before their batches: ``work(env, queries)``;
      its records are the selected queries from then on (as many as it got); or its ``on_run`` hook;
    - ``QUERIES``: in each batch's chain before the answers: ``work(env, queries)``; its records are the
      batch's queries from then on (as many as it got: a stage rewrites queries, it drops none);
    - ``ANSWERS``: in each batch's chain: ``work(env, queries, answers)``; its records are the answers the
      later stages see (``generate``'s ``on_batch`` hook makes the first ones);
    - ``VERDICTS``: in each batch's chain, side by side (one after the other on a one-request-at-a-time
      server): ``work(env, queries, spec.takes(section, answers))``; its records stay its batch outcome;
    - ``SETS``: in each batch's chain, its ``on_batch`` hook builds the batch's sets (``Batch.sets``) from
      the verdicts;
    - ``ITEMS``: in each batch's chain after the sets: ``work(env, queries, spec.takes(section, sets))`` (the
      batch's sets, ``stages/sets.py``'s result, unless ``takes`` says what of them); its records are kept
      beside the batch's sets (``pipeline/set_parts.py``) for the release;
    - ``RELEASE``: the release written from the kept sets, once every batch is done (no work of its own).
    """

    POOL = "pool"
    RUN = "run"
    QUERIES = "queries"
    ANSWERS = "answers"
    VERDICTS = "verdicts"
    SETS = "sets"
    ITEMS = "items"
    RELEASE = "release"


# positions whose stages have no step of their own: each needs its hook (``on_run`` or ``on_batch``)
HOOKED = (Position.POOL, Position.SETS)
# positions in each batch's chain, in order
IN_BATCH = (Position.QUERIES, Position.ANSWERS, Position.VERDICTS, Position.SETS, Position.ITEMS)


Out = TypeVar("Out")  # what a stage's work produced


@dataclass(frozen=True)
class StageResult(Generic[Out]):
    """What a stage's work gives for one batch, whatever the stage: what it produced (``records``: the records its
    position hands on, or the value its hook reads), a Failure for each thing it could not do, and its counts
    (``stats``: the run summary's and the manifest's ``stages[].stats``, merged over the stage's batches). The
    one place that runs a stage's work refuses any other result (``pipeline/executor.py``); the run reads it in
    one (``BuildRun.record``)."""

    records: Out
    failures: Sequence[Failure] = ()
    stats: Mapping[str, Any] = field(default_factory=dict)


Entry = tuple[Item, Mapping[str, Any]]  # an item of the release and its line of annotations.jsonl


class ReleaseWriter(Protocol):
    """What an ``ITEMS`` stage's ``writes`` makes: it sees the release's entries stream by, then writes its files."""

    def watch(self, entries: Iterable[Entry]) -> Iterator[Entry]: ...

    def write(self, folder: Path) -> None: ...


RunHook = Callable[["BuildRun", "Flow"], Awaitable[None]]  # a stage over the run: reads and sets the flow
BatchHook = Callable[["BuildRun", "Batch"], Awaitable[None]]  # a stage in a batch's chain: reads and sets the batch
# what the run keeps of its recorded batches (each batch's result, its records dropped)
Recorded = Callable[["BuildRun", "Flow", "list[StageResult[None]]"], None]


@dataclass(frozen=True)
class StageSpec:
    """One build stage.

    - ``name``: its one name (config ``stages:``, the run summary, the cache, the Prefect task);
    - ``work``: ``work(env, *inputs) -> StageResult`` over one batch (for ``gold`` and ``route``, the whole
      run's one batch); None for a step the flow runs itself (``release``);
    - ``config``: the build config's section the work gets as ``env.section`` and the key reads;
    - ``section_of``: ``section_of(config) -> section``, what the work gets as its section where that is not the
      ``config`` key as it is (``style``: its options and the build's judge; None where the key is left out);
    - ``endpoints``: the section's endpoint names the key reads (a function of the section; it may
      return None: no endpoint for this form of the stage);
    - ``identity``: what else of the config the key reads (a function of the whole config);
    - ``encoder``: the key reads the build's sentence encoder, and the work gets the embedding store;
    - ``prompts``: the ``prompts/`` folders (or top-level files) the key reads;
    - ``keyed_inputs``: the key reads the batch's inputs (their records);
    - ``key_reads``: what of each input record the key reads, where the work reads less than the whole
      record (``generate`` reads a query's id and conversation, not the goal routing may change later);
    - ``cached``: its batches are kept under their key (``embed``'s cache is the embedding store);
    - ``llm``: it calls an LLM (through the build's one client);
    - ``answers``: its requests without a reply schema ask for answers (texts the stages after it read and
      judge): a dry run stands in a distinct text for each one it cannot answer from the cache;
    - ``counts``: what one unit of its work is, for the log and a progress reporter;
    - ``listed``: a name the config's ``stages:`` accepts; ``optional``: one it may leave out before
      the last stage it lists;
    - ``at``: where it runs (:class:`Position`); None for a stage run by another's hook (``embed``): preflight
      refuses a listed stage without one, or at a position of ``HOOKED`` without its hook;
    - ``runs_with``: a stage the config does not list runs when this listed stage runs (``select`` with
      ``gather``, ``gold`` with ``generate``);
    - ``when``: ``when(section) -> bool``, whether this form of the stage runs (the LLM classifier's batches
      with ``method: llm``, routing with ``route.enabled``);
    - ``on_run``: ``await on_run(run, flow)``, the stage over the run (``POOL``, ``RUN``): what it reads of the
      :class:`~rmb_build.stages.flow.Flow` and what it puts there, through the run's step (``run.call``);
    - ``on_batch``: ``await on_batch(run, batch)``, the stage in a batch's chain (``ANSWERS``, ``SETS``): what
      it reads of the :class:`~rmb_build.stages.flow.Batch` and puts there;
    - ``recorded``: ``recorded(run, flow, kept)``, what the run keeps of its batches once they are recorded
      (the run summary's figures, the accounting);
    - ``takes``: ``takes(section, input) -> input``, what of its position's input the work gets (an ``ITEMS``
      stage's: of the batch's sets; a ``VERDICTS`` stage's: of the batch's answers);
    - ``bound``: ``bound(queries, config) -> calls``, the most LLM calls its batch of ``queries`` sends, for
      a dry run that cannot know the batch's inputs (an ``ITEMS`` stage's, where its sets are not known);
    - ``checks``: ``checks(stats) -> section``, the manifest's ``checks.<name>`` from its merged stats (it may refuse
      figures that do not balance);
    - ``writes``: ``writes(records, section)`` for an ``ITEMS`` stage whose kept records go into the release: a
      writer whose ``watch(entries)`` sees the release's items stream by and whose ``write(folder)`` writes its
      files into the release folder (``section``: its ``checks``, which the writer may add to);
    - ``plan_note``: ``plan_note(estimates, stand_ins) -> text``, what its figures in a dry run are, for the plan's
      ``exact.calls`` (``stand_ins``: its answers the plan stood in for);
    - ``of``: the stage this one is a form of (the LLM classifier's batches are ``classify``'s);
    - ``sends``: the stages whose LLM requests its work sends, where not its own (the gold check asks
      the judge and the guard): what its progress line counts;
    - ``embeds``: ``embeds(section, queries) -> texts``, the texts its batches look up in the build's
      embedding store, embedded first (``embed`` batches) while the queries wait on disk;
    - ``check``: ``check(config, stages)``, preflight's check of what the stage needs of the config when it runs
      (``stages``: the build's): raises ``ConfigError`` naming the field (preflight names the file).
    """

    name: str
    work: Callable[..., StageResult[Any] | Awaitable[StageResult[Any]]] | None = None
    config: str | None = None
    endpoints: Callable[[Any], Sequence[str] | None] | None = None
    identity: Callable[[BuildConfig], list[object]] | None = None
    encoder: bool = False
    prompts: tuple[str, ...] = ()
    keyed_inputs: bool = True
    key_reads: Callable[[Any], Any] | None = None
    cached: bool = True
    llm: bool = False
    answers: bool = False
    counts: str = "queries"
    listed: bool = True
    optional: bool = False
    at: Position | None = None
    runs_with: str | None = None
    when: Callable[[Any], bool] | None = None
    on_run: RunHook | None = None
    on_batch: BatchHook | None = None
    recorded: Recorded | None = None
    takes: Callable[[Any, Any], Any] | None = None
    bound: Callable[[int, BuildConfig], int] | None = None
    checks: Callable[[Any], dict[str, Any]] | None = None
    writes: Callable[[Iterable[dict[str, Any]], dict[str, Any]], ReleaseWriter] | None = None
    plan_note: Callable[[Any, int], str] | None = None
    of: str | None = None
    sends: tuple[str, ...] = ()
    embeds: Callable[[Any, Sequence[Any]], list[str]] | None = None
    section_of: Callable[[BuildConfig], object] | None = None
    check: Callable[[BuildConfig, Sequence[str]], None] | None = None

    def section(self, cfg: BuildConfig) -> object:
        """Its section of ``cfg`` (``config``, or ``section_of``); None for none, or a section the config leaves out."""
        if self.config is None:
            return None
        return self.section_of(cfg) if self.section_of is not None else getattr(cfg, self.config)

    @property
    def stage(self) -> str:
        """The stage its batches count for and its key names."""
        return self.of or self.name

    @property
    def runnable(self) -> bool:
        """It has a way to run: a position, and its hook where the position has no step of its own."""
        if self.at is None:
            return False
        return self.at not in HOOKED or self.on_run is not None or self.on_batch is not None

    @property
    def requests_of(self) -> tuple[str, ...]:
        """The stages named on the LLM requests its work sends (its own unless ``sends`` says)."""
        return self.sends or (self.stage,)

    @property
    def module(self) -> str:
        """The module whose code (and all it reaches) the cache key hashes."""
        return self.work.__module__ if self.work is not None else ""


Section = TypeVar("Section")  # a stage's config section (a model of ``stages/options.py``), or None


@dataclass
class StageEnv(Generic[Section]):
    """What a stage's work gets from the run besides its inputs: its config section, the LLM client
    (LLM stages), the embedding settings and store folder (stages that embed; ``store`` is opened per
    batch by the executor, so that its figures are that batch's). Only what the work needs travels to
    a Dask worker: never the whole config (its endpoints may hold credentials)."""

    section: Section
    client: ChatClient | None = None
    embeddings: EmbeddingsConfig | None = None
    store_dir: str | None = None
    store: EmbeddingStore | None = None

    def chat(self) -> ChatClient:
        """The LLM client: an LLM stage's env has one (``StageSpec.llm``)."""
        assert self.client is not None, "a stage that is not flagged llm asked for the LLM client"
        return self.client

    def open_store(self) -> EmbeddingStore | None:
        """A new store object on the build's vectors (``None`` without embedding settings)."""
        if self.embeddings is None or self.store_dir is None:
            return None
        return open_store(self.embeddings, self.store_dir)


def open_store(embeddings: EmbeddingsConfig, folder: str | os.PathLike) -> EmbeddingStore:
    """The build's embedding store (``EmbeddingsConfig`` ``embeddings``) in ``folder``: a new object per
    batch, so that its stats are that batch's; every object and process shares the folder's vectors."""
    return store_for(folder, embeddings.model, embeddings.backend, embeddings.dtype)
