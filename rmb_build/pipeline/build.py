"""The build: gather -> dedup -> classify -> select -> generate -> judge + guard -> build sets -> release.

Plain Python over the ordered stage specs: batching, the chains of LLM stages, planning (``--dry-run``)
and resume are decided here; every step, harm evidence, selection, the gold check and goal routing
included, is a stage whose work a runner (``runner.py``: in-process, or Prefect) executes under its
cache key (``BuildRun.call``/``acall``/``once``), and a batch already computed comes back from it.

CPU stages are synchronous batches (``dedup`` and embedding ``classify`` batches go through the
runner's pool; on a Dask cluster the texts they embed go first, as ``embed`` batches);
LLM stages (LLM classification included) are async batches awaited here, all through one LLM
client (one cache, budget and usage total), one chain per batch of queries (generate, then judge and
guard side by side, or one after the other when they share a one-request-at-a-time server, then that
batch's sets), a bounded number of batches at once: the LLM client's limits decide how many requests
are in flight. A finished batch leaves its items in ``runs/<name>/sets/`` and only its figures in
memory; the release is written from there, streamed. Each stage's seconds, batches and cache hits
land in ``runs/<name>/summary.json``, its failures in ``runs/<name>/failures.jsonl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

from rmb_build.core import paths as P
from rmb_build.core.errors import RMBError
from rmb_build.core.jsonable import jsonable
from rmb_build.core.memory import give_back, thaw
from rmb_build.core.paths import BuildPaths
from rmb_build.core.records import Failure, Query
from rmb_build.llm import LLMClient
from rmb_build.llm.planning import PlanningClient, Watched
from rmb_build.pipeline import label_checks, set_parts, stage_stats, stages
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.context import BuildRun, RunOptions
from rmb_build.pipeline.executor import Timed, is_async
from rmb_build.pipeline.manifest import Accounting, embeddings_section, sources_section
from rmb_build.pipeline.preflight import preflight
from rmb_build.pipeline.release_step import write_built_release
from rmb_build.pipeline.run_state import RunState
from rmb_build.pipeline.runner import Runner
from rmb_build.stages import (
    classify,
    dedup,
    embed,
    gather,
    generate,
    guard,
    harm_evidence,
    judge,
    release,
    route,
    select,
    sets,
)
from rmb_build.stages.common import StageResult
from rmb_build.stages.gather import read_queries, write_queries
from rmb_build.stages.sets import finished
from rmb_build.stages.spec import Entry, Position, ReleaseWriter, StageSpec

T = TypeVar("T")


def batched(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in batches of ``size`` (one empty batch for no items, so every stage still reports)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


EMBED_BATCH = 512  # texts per embedding task on a Dask cluster


def _uses_llm(run: BuildRun) -> bool:
    return run.runs(generate.SPEC) or (run.runs(classify.SPEC) and run.cfg.classifier.method == "llm")


async def _step(run: BuildRun, spec: StageSpec, *inputs: object) -> Timed:
    """``spec`` over one batch through the run's step: awaited (an async work), or here and now (a CPU work)."""
    return await run.acall(spec, *inputs) if is_async(spec) else run.call(spec, *inputs)


def _same_queries(spec: StageSpec, queries: list[Query], result: StageResult[Query]) -> list[Query]:
    """The queries a ``QUERIES`` or ``RUN`` stage's result holds: as many as it got (the accounting counts them)."""
    assert spec.at is not None, spec.name
    out = list(result.records)
    if len(out) != len(queries):
        raise RMBError(f"stage {spec.name!r} at {spec.at.value}: got {len(queries)} queries, returned {len(out)}")
    return out


async def run_pipeline(
    cfg: BuildConfig, runner: Runner, workdir: str | os.PathLike | None = None, options: RunOptions | None = None
) -> dict[str, Any]:
    """Build the release ``cfg`` describes, every batch through ``runner``; returns the run summary.

    ``options.dry_run`` takes the same steps with a planning client (``llm/planning.py``) in place of the
    LLM client and returns the estimated LLM cost instead of calling any model: the requests the stages
    make, answered from the cache or by stand-ins, sent nowhere; no set and no release is written.
    ``options.min_gold_agreement`` stops before generation when the judge agrees less with ``judge.gold``.
    """
    options = options or RunOptions()
    paths = BuildPaths.of(cfg.name, workdir)
    run = BuildRun(cfg, options, paths, preflight(cfg, options.config_file), RunState(paths.run), runner)
    run.log.info("build %r: stages %s; working state in %s", cfg.name, ", ".join(run.stages), paths.run)
    try:
        queries = _gather_and_dedup(run)
        limit = options.max_cost if options.max_cost is not None else cfg.run.max_cost
        # One client for every LLM call of the build (classification included): one cache, one budget,
        # one usage total; a dry run's planner answers from the cache or with stand-ins and sends nothing.
        if _uses_llm(run) and options.dry_run:
            answer_stages = [s.stage for s in stages.STAGES if s.answers]
            run.client = PlanningClient.reading(cfg.endpoints, paths.llm_cache, answer_stages)
        elif _uses_llm(run):
            run.client = LLMClient(  # its calls show in the stage's progress, not in a bar of their own
                cfg.endpoints, cache_dir=paths.llm_cache, max_cost=limit, progress=False
            )
        pool = [queries]  # handed over, not kept here: the flow's frame would hold every query to the end
        del queries
        async with run.client if run.client is not None else contextlib.nullcontext():
            return await _from_classify(run, pool)
    finally:
        run.progress.close()
        thaw()  # give_back froze what it kept between stages


def _gather_and_dedup(run: BuildRun) -> list[Query]:
    """The gathered queries (written to the raw folder), less duplicates; the accounting so far in ``run.acc``."""
    cfg, paths = run.cfg, run.paths
    gathered = run.record(gather.SPEC, [run.call(gather.SPEC, str(paths.raw / P.QUARANTINE), cfg.run.max_queries)])[0]
    raw = paths.raw / P.RAW_QUERIES
    write_queries(gathered.queries, raw)
    run.acc = Accounting(gathered=len(gathered.queries), sources=sources_section(cfg, gathered.stats))
    if not run.runs(dedup.SPEC):
        return gathered.queries
    pool = [gathered.queries]
    del gathered  # on disk now: the encoder's pass, the build's peak of memory, runs without the queries
    queries = _embedded_first(run, dedup.SPEC, pool, raw, written=True)
    deduped = run.record(dedup.SPEC, [run.submit(dedup.SPEC, queries).result()])[0]
    run.acc.dedup_removed = stage_stats.count_by(deduped.removed, "kind")
    return deduped.kept


async def _from_classify(run: BuildRun, pool: list[list[Query]]) -> dict[str, Any]:
    """Classify, select, then the LLM stages and the release, all through ``run.client``. ``pool`` holds
    the deduplicated queries; it is emptied, so that they are freed once selection and routing are done."""
    cfg, paths, state, acc, log = run.cfg, run.paths, run.state, run.acc, run.log
    if not run.runs(classify.SPEC):
        queries = pool.pop()
    elif cfg.classifier.method == "llm":
        queries = pool.pop()
        runs = [run.acall(classify.LLM_SPEC, b) for b in batched(queries, cfg.run.batch_size)]
        queries = [q for part in run.record(classify.LLM_SPEC, await asyncio.gather(*runs)) for q in part]
    else:
        queries = _classify_on_runner(run, pool)
    queries, harm = run.call(harm_evidence.SPEC, queries, run.runs(classify.SPEC)).value
    log.info(
        "harm evidence: %d classified harmful, %d kept (P(harm) >= %.2f), turned away %s",
        harm["classified_harmful"],
        harm["kept"],
        harm["threshold"],
        harm["turned_away"] or "none",
    )
    chosen = run.call(select.SPEC, queries, cfg.scenarios, str(paths.run / P.SELECTED_QUERIES)).value
    selected, acc.not_selected, acc.short_goals = chosen.selected, chosen.not_selected, chosen.short_goals
    acc.selected = len(selected)
    log.info("selected %d of %d queries: %s", len(selected), len(queries), stage_stats.goal_counts(selected))
    if not run.runs(generate.SPEC):
        if run.planning:
            return _planned(run, len(selected))
        _final_flush(run)
        return {"selected": len(selected), "run": str(paths.run)}

    checks: dict[str, Any] = {"harm_evidence": harm_evidence.section(harm)}
    routing = routed = None
    sets_dir = paths.sets
    try:
        # --- label checks before generation (rmb_build/pipeline/label_checks.py): judge vs gold, guard routing ---
        checks["gold"] = await label_checks.check_gold(run)
        if cfg.route.enabled and run.runs(guard.SPEC):
            routed = await label_checks.route_by_guard(run, queries, selected, checks["gold"])
            chosen, routing = routed.selection, routed.routing
            selected, acc.not_selected, acc.short_goals = chosen.selected, chosen.not_selected, chosen.short_goals
            acc.selected = len(selected)
        # --- end of label checks ---
        on_items = [stage for stage in stages.at(Position.ITEMS) if run.runs(stage)]
        for spec in stages.at(Position.RUN):  # once over the whole run's selected queries, before their batches
            if run.runs(spec):
                once = run.record(spec, [await _step(run, spec, selected)])[0]
                selected = _same_queries(spec, selected, once)
        del queries  # every query not selected is accounted for: from here on only the selected ones are held
        batches = batched(selected, cfg.run.batch_size)
        per_batch = (*stages.at(Position.QUERIES), generate.SPEC, *stages.at(Position.ANSWERS), judge.SPEC, guard.SPEC)
        for spec in (*per_batch, sets.SPEC):
            if run.runs(spec) and not (run.planning and spec is sets.SPEC):  # a plan builds sets only for style
                run.progress.expect(spec.stage, len(batches))
        if not run.planning:
            set_parts.clear(sets_dir, keep=range(len(batches)))
        at_once = asyncio.Semaphore(_chains_at_once(cfg))
        bounds: dict[str, list[int]] = {}  # a dry run's: the calls of item stages on batches whose sets it cannot know

        async def chain(index: int, batch: list[Query]) -> dict[str, Timed]:
            async with at_once:
                with _answered_by(run) as seen:
                    batch, outcomes = await _llm_chain(run, batch)
                # A plan builds a batch's sets (kept nowhere) only for the stages on items, and only where every
                # reply they read is the build's own (no stand-in): then those stages ask what the build will.
                known = seen is None or (seen.asked > 0 and not seen.stand_ins)  # nothing seen: not known
                if judge.SPEC.name in outcomes and (not run.planning or (known and on_items)):
                    outcomes[sets.SPEC.name] = _sets_of_batch(run, sets_dir, index, batch, outcomes)
                    for spec in on_items:
                        outcomes[spec.name] = await _on_items(run, spec, sets_dir, index, batch, outcomes)
                elif judge.SPEC.name in outcomes:
                    for spec in on_items:
                        if spec.bound is not None:
                            bounds.setdefault(f"{spec.name}_calls_at_most", []).append(spec.bound(len(batch), cfg))
                kept = {k: _slim(t) for k, t in outcomes.items()}  # the batch's records are on disk: drop them here
                del outcomes
                give_back()
                return kept

        chains = await asyncio.gather(*(chain(i, b) for i, b in enumerate(batches)))
    finally:
        assert run.client is not None  # generate runs: an LLM stage
        state.usage_run = jsonable(run.client.usage())
        state.flush()
    if run.planning:
        return _planned(run, len(selected), routed, {k: sum(v) for k, v in bounds.items()})
    for spec in stages.at(Position.QUERIES):
        if run.runs(spec):
            run.record(spec, [c[spec.name] for c in chains])
    responses = sum(part.count for part in run.record(generate.SPEC, [c[generate.SPEC.name] for c in chains]))
    for spec in stages.at(Position.ANSWERS):
        if run.runs(spec):
            run.record(spec, [c[spec.name] for c in chains])
    if not run.runs(judge.SPEC):
        _final_flush(run)
        return {"selected": len(selected), "responses": responses, "run": str(paths.run)}
    for spec in (judge.SPEC, guard.SPEC, sets.SPEC, *on_items):
        run.record(spec, [c[spec.name] for c in chains])
    for spec in on_items:
        if spec.checks is not None:
            checks[spec.name] = spec.checks(state.stage(spec.name).stats)
    counts = state.stage(sets.SPEC.name).stats
    acc.finish(len(selected) * len(cfg.generators), state.failure_counts().get(generate.SPEC.name, 0))
    _final_flush(run)
    if not run.runs(release.SPEC):
        return {
            "selected": len(selected),
            "pairwise": counts.get("pairwise", 0),
            "bon": counts.get("bon", 0),
            "run": str(paths.run),
        }
    if not counts.get("pairwise") and not counts.get("bon"):
        raise RMBError(
            f"build {cfg.name!r}: no pairwise or BoN item could be built from {len(selected)} queries "
            f"(why: {paths.run / 'summary.json'}, stages.{sets.SPEC.name}.stats; failures.jsonl)"
        )
    n_batches = len(batches)
    del selected, batches, chains
    entries: Iterator[Entry] = set_parts.merged(sets_dir, range(n_batches))
    with run.progress.step(release.SPEC.name):
        writers = [  # what the stages on items add to the release (``style``: Style_set/)
            spec.writes(set_parts.stage_parts(sets_dir, spec.name, range(n_batches)), checks.setdefault(spec.name, {}))
            for spec in on_items
            if spec.writes is not None
        ]
        for writer in writers:
            entries = writer.watch(entries)
        return _release(run, checks, routing, entries, _written_by(writers) if writers else None)


def _sets_of_batch(run: BuildRun, sets_dir: Path, index: int, batch: list[Query], outcomes: dict[str, Timed]) -> Timed:
    """One judged and guarded batch's pairwise and BoN items, kept in ``sets_dir`` (``set_parts``)
    and counted in ``run.acc``."""
    responses = outcomes[_last_answers(outcomes)].value.records
    scores, labels = outcomes[judge.SPEC.name].value.records, outcomes[guard.SPEC.name].value.records
    batch = guard.apply_prompt_scenarios(batch, labels)
    built = run.call(sets.SPEC, batch, responses, scores, labels)
    if not run.planning:  # a plan's sets are the style stage's input only
        set_parts.write_part(sets_dir, index, built.value)
        run.acc.add_batch(batch, responses, scores, [*built.value.pairwise, *built.value.bon])
    return built


def _written_by(writers: list[ReleaseWriter]) -> Callable[[Path], None]:
    """The release's files that the stages on items write (``StageSpec.writes``), into its folder."""

    def write(folder: Path) -> None:
        for writer in writers:
            writer.write(folder)

    return write


async def _on_items(
    run: BuildRun, spec: StageSpec, sets_dir: Path, index: int, batch: list[Query], outcomes: dict[str, Timed]
) -> Timed:
    """A stage on items over one batch's sets (what of them its spec ``takes``), its records kept in ``sets_dir``."""
    built = outcomes[sets.SPEC.name].value
    done = await _step(run, spec, batch, spec.takes(run.section(spec), built) if spec.takes else built)
    if not run.planning:
        set_parts.write_stage_part(sets_dir, spec.name, index, done.value.records)
    return done


def _answered_by(run: BuildRun) -> contextlib.AbstractContextManager[Watched | None]:
    """In a dry run, what the planner answered within the block (``PlanningClient.watch``); else None."""
    return PlanningClient.watch() if run.planning else contextlib.nullcontext()


def _last_answers(outcomes: dict[str, Timed]) -> str:
    """The stage whose answers the later stages see: generate's, or the last answer stage's."""
    return [generate.SPEC.name, *(s.name for s in stages.at(Position.ANSWERS) if s.name in outcomes)][-1]


@dataclass(frozen=True)
class _Done:
    """What the flow keeps of a finished batch's stage result: its stats, failures and record count."""

    stats: dict[str, Any]
    failures: tuple[Failure, ...]
    count: int


def _slim(t: Timed) -> Timed:
    v = t.value
    return dataclasses.replace(
        t,
        value=_Done(
            stage_stats.stats_of(v), tuple(getattr(v, "failures", None) or ()), len(getattr(v, "records", None) or ())
        ),
    )


def _release(
    run: BuildRun,
    checks: dict[str, Any],
    routing: route.Routing | None,
    entries: Iterator[Entry],
    more_files: Callable[[Path], None] | None = None,
) -> dict[str, Any]:
    """Write, audit and swap in the release from the merged batches' items (streamed, never all in memory)."""
    cfg, paths, state = run.cfg, run.paths, run.state
    if routing is not None:  # goal routing (rmb_build.stages.route): goal_from per item, counts in the manifest
        summary = route.ItemSummary()  # its counts fill in as the release is written, before the manifest
        checks["routing"] = {"scope": cfg.route.scope, "queries": routing.stats(), "items": summary.counts}
        entries = (
            (item, summary.add({**note, **route.routing_fields(note, routing.decisions)})) for item, note in entries
        )
    store, started = run.store(), time.perf_counter()
    manifest = write_built_release(
        cfg,
        entries,
        paths.release,
        checks={k: v for k, v in checks.items() if v is not None},
        accounting=run.acc,
        stages=[s.to_json() for s in state.stages.values()],
        failures=state.failure_counts(),
        usage=state.usage_total(),
        log=run.log.info,
        embed=store,
        more_files=more_files,
    )
    # not a stage record (those count cached task batches): the release is written and audited every run
    _final_flush(
        run,
        {release.SPEC.name: store.stats.to_json()},
        release=str(paths.release),
        release_seconds=round(time.perf_counter() - started, 3),
    )
    run.log.info("release written to %s: %s", paths.release, manifest["counts"]["items"])
    return {
        "release": str(paths.release),
        "run": str(paths.run),
        "counts": manifest["counts"],
        "accounting": manifest["accounting"],
        "audit": manifest["audit"].get("counts", {}),
        "failures": manifest["failures"],
        "stages": manifest["stages"],
    }


def _classify_on_runner(run: BuildRun, pool: list[list[Query]]) -> list[Query]:
    """The embedding classifier over batches on the configured task runner: the queries ``pool`` holds,
    classified (its texts embedded first, ``_embedded_first``)."""
    queries = _embedded_first(run, classify.SPEC, pool, run.paths.run / P.DEDUPED_QUERIES)
    futures = [run.submit(classify.SPEC, b) for b in batched(queries, run.cfg.run.batch_size)]
    return [q for part in run.record(classify.SPEC, [f.result() for f in futures]) for q in part]


def _embedded_first(
    run: BuildRun, spec: StageSpec, pool: list[list[Query]], spill: Path, written: bool = False
) -> list[Query]:
    """The queries ``pool`` holds, read back from ``spill`` (written here unless ``written``) once ``spec``'s
    texts (``spec.embeds``) are in the build's store: they wait on disk while the encoder runs (its pass
    is the build's peak of memory)."""
    assert spec.embeds is not None, spec.name
    queries = pool.pop()
    texts = spec.embeds(run.env(spec).section, queries)
    if not written:
        write_queries(queries, spill)
    del queries
    _embed_on_runner(run, texts)
    del texts
    return read_queries(spill)


def _embed_on_runner(run: BuildRun, texts: list[str]) -> None:
    """Embed ``texts`` into the build's store before the stage's own batches, which then find every
    vector there. On a Dask cluster: batch tasks the workers share (each worker would otherwise embed
    what it needs by itself, the classifier's training examples on every worker). On the thread
    runner: one call in this thread, so the stage's concurrent batches never run two encoders at
    once (measured: two encoders in one process peak 100-170 MB higher and are no faster on 2 cores)."""
    distinct = sorted(dict.fromkeys(texts), key=len)  # length-sorted batches pad least
    if run.cfg.run.task_runner != "dask":
        run.record(embed.SPEC, [run.call(embed.SPEC, distinct)])
        return
    futures = [run.submit(embed.SPEC, b) for b in batched(distinct, EMBED_BATCH)]
    run.record(embed.SPEC, [f.result() for f in futures])


def _final_flush(run: BuildRun, more_embeddings: dict[str, Any] | None = None, **extra: Any) -> None:
    """summary.json with the accounting and the build's embedding figures (``embeddings_section``:
    the stages', plus ``more_embeddings``, e.g. the release audit's); ``release_seconds`` also goes
    into its ``timing``."""
    state = run.state
    state.release_seconds = extra.get("release_seconds", state.release_seconds)
    totals = embeddings_section([s.to_json() for s in state.stages.values()], run.store(), **(more_embeddings or {}))
    state.flush(accounting=run.acc.to_json(), embeddings=totals, **extra)


def _planned(
    run: BuildRun, selected: int, routed: route.Routed | None = None, style_estimates: dict[str, int] | None = None
) -> dict[str, Any]:
    """The dry run's result: the planner's report (``rmb_build.llm.planning``) of what the build's steps
    asked, plus ``exact`` (what each figure is) and ``estimates`` (what the plan cannot count)."""
    cfg = run.cfg
    planner = run.client or PlanningClient(cfg.endpoints)  # no LLM stage: an empty plan
    assert isinstance(planner, PlanningClient)  # a dry run's client
    estimates: dict[str, Any] = {}
    if routed is not None:
        # a verdict the plan stood in for may route its query away: each could draw a replacement a round
        unknown = sum(1 for c in planner.calls.values() if c.phase == route.SPEC.name and c.cached is None)
        bound = min(unknown * cfg.route.top_up_rounds, routed.top_up_room)
        if bound:
            estimates["route_top_up_calls_at_most"] = bound
    estimates.update(style_estimates or {})
    report = planner.report()
    stand_ins = Counter(c.phase for c in planner.calls.values() if c.cached is None and planner.is_answer(c.request))
    on_items = sum(stand_ins[s.stage] for s in stages.at(Position.ITEMS))  # rewrites of items the plan stood in for
    estimate = {
        **report,
        "estimates": estimates,
        "exact": {
            "calls": (
                "exact"
                if not estimates and not stand_ins
                else "exact for what the cache answers"
                + (
                    "; judge and guard calls on answers not yet generated are an upper bound (an answer cut at "
                    "max_tokens is not judged)"
                    if sum(stand_ins.values()) > on_items
                    else ""
                )
                + (
                    "; goal routing's top-up rounds are not counted, see estimates"
                    if "route_top_up_calls_at_most" in estimates
                    else ""
                )
                + "".join(s.plan_note(estimates, stand_ins[s.stage]) for s in stages.at(Position.ITEMS) if s.plan_note)
            ),
            "prompt_tokens": "; ".join(f"{name}: {how}" for name, how in report["prompt_tokens_method"].items()),
            "completion_tokens": "upper bound: each call's max_tokens",
            "completion_tokens_estimate": "estimate: the mean of cached replies of the same endpoint, model and phase",
            "cost_usd": "upper bound: prompt estimate plus max_tokens at each endpoint's price_per_mtok",
        },
    }
    _final_flush(run, dry_run=True, estimate=estimate)
    return {"dry_run": True, "selected": selected, "estimate": estimate, "run": str(run.paths.run)}


async def _llm_chain(run: BuildRun, batch: list[Query]) -> tuple[list[Query], dict[str, Timed]]:
    """One batch through the stages on queries, generate and the stages on answers, then judge and guard
    side by side: the batch's queries (as the stages on queries left them) and each stage's outcome."""
    cfg, log = run.cfg, run.log
    step = run.acall
    out: dict[str, Timed] = {}
    for spec in stages.at(Position.QUERIES):
        if run.runs(spec):
            out[spec.name] = await _step(run, spec, batch)
            batch = _same_queries(spec, batch, out[spec.name].value)
    log.info("%s: batch of %d queries x %d generators started", generate.SPEC.name, len(batch), len(cfg.generators))
    out[generate.SPEC.name] = await step(generate.SPEC, batch)
    answers = out[generate.SPEC.name].value.records
    log.info("%s: batch of %d queries -> %d answers", generate.SPEC.name, len(batch), len(answers))
    for spec in stages.at(Position.ANSWERS):
        if run.runs(spec):
            out[spec.name] = await _step(run, spec, batch, answers)
            answers = out[spec.name].value.records
    if not run.runs(judge.SPEC):
        return batch, out
    answers = finished(answers)  # an answer cut at max_tokens never reaches a release: not judged
    log.info("%s + %s: %d answers to %d queries started", judge.SPEC.name, guard.SPEC.name, len(answers), len(batch))
    judge_run = step(judge.SPEC, batch, answers)
    guard_run = step(guard.SPEC, batch, answers)
    if _one_slot(cfg, cfg.judge.endpoint, cfg.guard.endpoint):
        # One request at a time on one server: interleaving judge and guard prompts would throw away
        # the server's KV cache of the previous prompt's prefix (shared instructions, criteria, query)
        # on every switch, so run them one after the other.
        judged = await judge_run
        guarded = await guard_run
    else:
        judged, guarded = await asyncio.gather(judge_run, guard_run)
    log.info(
        "%s + %s: batch of %d queries -> %d scores, %d guard labels",
        judge.SPEC.name,
        guard.SPEC.name,
        len(batch),
        len(judged.value.records),
        len(guarded.value.records),
    )
    return batch, {**out, judge.SPEC.name: judged, guard.SPEC.name: guarded}


def _chains_at_once(cfg: BuildConfig) -> int:
    """Batches in their LLM chain at once: enough queued requests to fill every endpoint's slots
    twice over, at least 4; a bound that does not grow with the build (each chain's prompts and
    replies are in memory while it runs)."""
    embedded = max((ep.servers for ep in cfg.endpoints.values() if ep.embedded), default=0)  # shared servers
    slots = embedded + sum(ep.max_concurrency or 8 for ep in cfg.endpoints.values() if not ep.embedded)
    return max(4, -(-2 * slots // cfg.run.batch_size))


def _one_slot(cfg: BuildConfig, *endpoint_names: str) -> bool:
    """True when the endpoints are one server that answers one request at a time (the embedded one)."""
    eps = [cfg.endpoints[name] for name in endpoint_names]
    if all(ep.embedded for ep in eps):  # every embedded model is served by the same llama.cpp process(es)
        return max(ep.servers for ep in cfg.endpoints.values() if ep.embedded) == 1
    return len({ep.base_url for ep in eps}) == 1 and all(ep.max_concurrency == 1 for ep in eps)
