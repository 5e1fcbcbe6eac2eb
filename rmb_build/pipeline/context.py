"""One build's run context (:class:`BuildRun`): what every part of the build reads, passed as one
object instead of five-argument tuples, and the one step every stage's batch takes, whatever the
stage (``run.call(SPEC, *inputs)``): its cache key (``keys.stage_key``, from what the spec says the
key reads), the runner (which reloads a batch computed in an earlier run under that key, or has it
computed and timed, ``executor.py``, and stamps it with this run); ``record`` adds the batches to the
run summary under the spec's stage. A dry run takes the same steps with a planning client
(``llm/planning.py``) in place of the LLM client: an LLM stage's batch then has no key (a plan is
never kept), and its requests count under the spec's stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from rmb_build.core import stop
from rmb_build.core.memory import give_back
from rmb_build.core.paths import FAILURES_FILE, BuildPaths
from rmb_build.llm.planning import PlanningClient
from rmb_build.pipeline import set_parts, stage_stats
from rmb_build.pipeline import stages as build_stages
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.executor import Timed
from rmb_build.pipeline.keys import stage_key
from rmb_build.pipeline.manifest import Accounting
from rmb_build.pipeline.progress import BuildProgress, bars_wanted
from rmb_build.pipeline.run_state import RunState, merge_stats
from rmb_build.pipeline.runner import Log, Runner, TimedFuture
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec, open_store

if TYPE_CHECKING:
    from rmb_build.embed.store import EmbeddingStore
    from rmb_build.llm.client import LLMClient
    from rmb_build.llm.types import ChatClient
    from rmb_build.stages.sets import SetsResult


class _Collected:
    """A submitted batch whose ``result()`` (the flow collecting it, any runner's future) reports it done."""

    def __init__(self, future: TimedFuture, run: "BuildRun", spec: StageSpec):
        self._future, self._run, self._spec, self._seen = future, run, spec, False

    def result(self) -> Timed:
        timed = self._future.result()
        if not self._seen:
            self._seen = True
            self._run._progress(self._spec, timed)
        return timed


@dataclass(frozen=True)
class RunOptions:
    """How this run was asked for, beside the config: ``rmb build``'s options."""

    config_file: str = "<config>"
    max_cost: float | None = None  # None: the config's ``run.max_cost``
    dry_run: bool = False
    min_gold_agreement: float | None = None
    progress: bool = True  # False: ``--no-progress`` (no bars, no progress lines)


@dataclass
class BuildRun:
    """One build as it runs: config, options, paths, the stages to run, the run state and accounting,
    the runner, the LLM client (set once the LLM stages start) and the log."""

    cfg: BuildConfig
    options: RunOptions
    paths: BuildPaths
    stages: list[str]
    state: RunState
    runner: Runner
    acc: Accounting = field(default_factory=Accounting)
    client: LLMClient | PlanningClient | None = None  # set once the LLM stages start
    progress: BuildProgress = field(init=False)

    def __post_init__(self) -> None:
        mode = ("bars" if bars_wanted() else "log") if self.options.progress else "off"
        sends: dict[str, tuple[str, ...]] = {}  # a stage's LLM requests: none for a CPU stage
        for spec in build_stages.STAGES:
            sends[spec.stage] = sends.get(spec.stage, ()) + (spec.requests_of if spec.llm else ())
        llm_stages = [name for name in self.stages if any(s.llm and s.stage == name for s in build_stages.STAGES)]
        self.progress = BuildProgress(
            self.log, mode, lambda: self.client, sends=lambda stage: sends.get(stage, (stage,)), llm_stages=llm_stages
        )

    @property
    def log(self) -> Log:
        return self.runner.log

    @property
    def planning(self) -> bool:
        """A dry run: the LLM stages ask a planning client, which sends nothing."""
        return self.options.dry_run

    def client_for(self, spec: StageSpec) -> ChatClient | None:
        """The client ``spec``'s requests go through: the build's, or in a dry run the planner's view
        that counts them under the spec's stage."""
        if self.planning:
            assert isinstance(self.client, PlanningClient), spec.name
            return self.client.for_phase(spec.stage)
        return self.client

    def runs(self, spec: StageSpec) -> bool:
        """Whether this build runs ``spec``'s stage: listed (or the stage it ``runs_with``), its config section
        there (a stage whose section the config leaves out, ``style`` without ``style:``, is off), and this
        form of it asked for (``spec.when``)."""
        if (spec.runs_with or spec.stage) not in self.stages:
            return False
        section = self.section(spec)
        if spec.config is not None and section is None:
            return False
        return spec.when is None or spec.when(section)

    def running(self, position: Position) -> list[StageSpec]:
        """The stages at ``position`` this build runs, in build order."""
        return [spec for spec in build_stages.at(position) if self.runs(spec)]

    def keep_sets(self, index: int, sets: SetsResult) -> None:
        """Batch ``index``'s sets, kept in the run's sets folder until the release is written (``set_parts``)."""
        set_parts.write_part(self.paths.sets, index, sets)

    def section(self, spec: StageSpec) -> object:
        """``spec``'s section of the config (``StageSpec.section``)."""
        return spec.section(self.cfg)

    def store(self) -> EmbeddingStore:
        """A new object on the build's embedding store (its figures are its own)."""
        return open_store(self.cfg.embeddings, self.paths.embeddings)

    def env(self, spec: StageSpec) -> StageEnv[object]:
        """What of the run ``spec``'s work gets: its config section, the client (LLM stages), the
        store's settings (stages that embed)."""
        return StageEnv(
            section=self.section(spec),
            client=self.client_for(spec) if spec.llm else None,
            embeddings=self.cfg.embeddings if spec.encoder else None,
            store_dir=str(self.paths.embeddings) if spec.encoder else None,
        )

    def _key(self, spec: StageSpec, inputs: Sequence[object]) -> str | None:
        if not spec.cached or (spec.llm and self.planning):
            return None
        return stage_key(spec, self.cfg, *inputs)

    def _progress(self, spec: StageSpec, timed: Timed) -> Timed:
        """The progress reporter sees each batch of ``spec`` finish."""
        self.progress.done(spec.stage)
        return timed

    def call(self, spec: StageSpec, *inputs: object) -> Timed:
        """``spec`` over one batch, here and now."""
        stop.check()  # a stop whose exception was swallowed ends the build here
        self.progress.begin(spec.stage)
        return self._progress(spec, self.runner.call(spec, self._key(spec, inputs), self.env(spec), inputs))

    def submit(self, spec: StageSpec, *inputs: object) -> _Collected:
        """``spec`` over one batch on the runner's pool (or cluster): something with ``.result() -> Timed``."""
        stop.check()
        self.progress.begin(spec.stage)
        return _Collected(self.runner.submit(spec, self._key(spec, inputs), self.env(spec), inputs), self, spec)

    async def acall(self, spec: StageSpec, *inputs: object) -> Timed:
        """An LLM stage over one batch, awaited in the flow's event loop."""
        stop.check()
        self.progress.begin(spec.stage)
        timed = await self.runner.acall(spec, self._key(spec, inputs), self.env(spec), inputs)
        return self._progress(spec, timed)

    async def once(self, spec: StageSpec, *inputs: object) -> Timed:
        """An LLM stage over the whole run (``gold``, ``route``), awaited through the runner step: its
        seconds as the stage's work (not in a dry run, whose plan is no work)."""
        timed = await self.acall(spec, *inputs)
        if not self.planning:
            self.state.add_work(spec.stage, timed.started, timed.seconds)
        return timed

    def record(self, spec: StageSpec, outcomes: Sequence[Timed]) -> list[StageResult[Any]]:
        """Adds batch outcomes to the run state under ``spec``'s stage: their failures and merged stats (the one
        reader of every stage's ``StageResult``), seconds of work only for batches computed in this run; returns
        their results."""
        stage = spec.stage
        rec = self.state.stage(stage)
        embedded = []
        for t in outcomes:
            rec.batches += 1
            if t.flow_run_id != self.runner.run_id:
                rec.cached_batches += 1
            else:
                self.state.add_work(stage, t.started, t.seconds)
                embedded.append(getattr(t, "embeddings", None) or {})
            self.state.add_failures(t.value.failures)
        rec.stats = merge_stats([rec.stats, *(t.value.stats for t in outcomes)])
        if any(embedded):  # the embedding store's figures, for batches computed in this run
            rec.stats["embeddings"] = merge_stats([rec.stats.get("embeddings") or {}, *embedded])
        cached = f" ({rec.cached_batches} from cache)" if rec.cached_batches else ""
        self.log.info("%s: %d batch(es)%s: %s", stage, len(outcomes), cached, stage_stats.brief(rec.stats))
        failed = [f for t in outcomes for f in t.value.failures]
        if failed:
            self.log.info(
                "%s: %d failed: %s (each listed in %s)",
                stage,
                len(failed),
                stage_stats.failure_reasons(failed),
                self.paths.run / FAILURES_FILE,
            )
        self.state.flush()
        give_back()
        return [t.value for t in outcomes]
