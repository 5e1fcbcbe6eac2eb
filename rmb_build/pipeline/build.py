"""The build: the stages of ``pipeline/stages.py``, position by position (``stages/spec.Position``).

Plain Python over the ordered stage specs: batching, the chains of LLM stages, planning (``--dry-run``)
and resume are decided here, for every stage alike; what a stage reads and gives is its spec's (its
position, its hooks ``on_run``/``on_batch``/``recorded``, ``takes``, ``checks``, ``writes``): no stage is named
here. Every step is a stage whose work a runner (``runner.py``: in-process, or Prefect) executes under its
cache key (``BuildRun.call``/``acall``/``once``), and a batch already computed comes back from it.

The stages over the pool (from gathering to selection) and over the run run once, in order, each handing the
flow (``stages/flow.Flow``) on. Then one chain per batch of selected queries: the stages on queries, on
answers, the verdicts side by side (or one after the other when they share a
one-request-at-a-time server), the batch's sets and the stages on items, a bounded number of batches at once:
the LLM client's limits decide how many requests are in flight. All LLM calls go through one client (one
cache, budget and usage total), opened before the first LLM stage. A finished batch leaves its items in
``runs/<name>/sets/`` and only its figures in memory; the release is written from there, streamed. Each
stage's seconds, batches and cache hits land in ``runs/<name>/summary.json``, its failures in
``runs/<name>/failures.jsonl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from rmb_build.core.errors import RMBError
from rmb_build.core.jsonable import jsonable
from rmb_build.core.memory import give_back, thaw
from rmb_build.core.paths import BuildPaths
from rmb_build.core.records import Query
from rmb_build.llm import LLMClient
from rmb_build.llm.planning import PlanningClient, Watched
from rmb_build.pipeline import set_parts, stages
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.context import BuildRun, RunOptions
from rmb_build.pipeline.executor import Timed, is_async
from rmb_build.pipeline.manifest import embeddings_section
from rmb_build.pipeline.preflight import preflight
from rmb_build.pipeline.release_step import write_built_release
from rmb_build.pipeline.run_state import RunState
from rmb_build.pipeline.runner import Runner
from rmb_build.stages.flow import Batch, Flow, batched
from rmb_build.stages.spec import IN_BATCH, Entry, Position, ReleaseWriter, StageResult, StageSpec

__all__ = ["batched", "run_pipeline"]

Summary = dict[str, object]  # what a build returns: the run summary's figures (``rmb build`` prints them)


async def _step(run: BuildRun, spec: StageSpec, *inputs: object) -> Timed:
    """``spec`` over one batch through the run's step: awaited (an async work), or here and now (a CPU work)."""
    return await run.acall(spec, *inputs) if is_async(spec) else run.call(spec, *inputs)


def _same_queries(spec: StageSpec, queries: list[Query], result: StageResult[list[Query]]) -> list[Query]:
    """The queries a ``QUERIES`` or ``RUN`` stage's result holds: as many as it got (the accounting counts them)."""
    assert spec.at is not None, spec.name
    out = list(result.records)
    if len(out) != len(queries):
        raise RMBError(f"stage {spec.name!r} at {spec.at.value}: got {len(queries)} queries, returned {len(out)}")
    return out


async def run_pipeline(
    cfg: BuildConfig, runner: Runner, workdir: str | os.PathLike | None = None, options: RunOptions | None = None
) -> Summary:
    """Build the release ``cfg`` describes, every batch through ``runner``; returns the run summary.

    ``options.dry_run`` takes the same steps with a planning client (``llm/planning.py``) in place of the
    LLM client and returns the estimated LLM cost instead of calling any model: the requests the stages
    make, answered from the cache or by stand-ins, sent nowhere; no set and no release is written.
    ``options.min_gold_agreement`` stops before the batches when the judge agrees less with the gold labels.
    """
    options = options or RunOptions()
    paths = BuildPaths.of(cfg.name, workdir)
    run = BuildRun(cfg, options, paths, preflight(cfg, options.config_file), RunState(paths.run), runner)
    run.log.info("build %r: stages %s; working state in %s", cfg.name, ", ".join(run.stages), paths.run)
    try:
        async with contextlib.AsyncExitStack() as opened:
            return await _run_stages(run, Flow(), opened)
    finally:
        run.progress.close()
        thaw()  # give_back froze what it kept between stages


async def _open_client(run: BuildRun, opened: contextlib.AsyncExitStack) -> None:
    """The build's one LLM client (one cache, one budget, one usage total), opened before its first LLM stage; a
    dry run's planner answers from the cache or with stand-ins and sends nothing."""
    if run.client is not None:
        return
    cfg, paths = run.cfg, run.paths
    if run.planning:
        answer_stages = [s.stage for s in stages.STAGES if s.answers]
        run.client = PlanningClient.reading(cfg.endpoints, paths.llm_cache, answer_stages)
    else:
        limit = run.options.max_cost if run.options.max_cost is not None else cfg.run.max_cost
        run.client = LLMClient(  # its calls show in the stage's progress, not in a bar of their own
            cfg.endpoints, cache_dir=paths.llm_cache, max_cost=limit, progress=False
        )
    await opened.enter_async_context(run.client)


async def _run_stages(run: BuildRun, flow: Flow, opened: contextlib.AsyncExitStack) -> Summary:
    """Every position in build order: the stages over the pool, over the run, the batches' chains, the release."""
    for spec in run.running(Position.POOL):
        assert spec.on_run is not None, spec.name  # preflight: a stage over the pool has its hook
        if spec.llm:
            await _open_client(run, opened)
        await spec.on_run(run, flow)
    in_batch = [spec for position in IN_BATCH for spec in run.running(position)]
    if not in_batch:  # nothing to do with the selection: the build ends here
        return _planned(run, flow) if run.planning else _finished(run, flow)
    if any(s.llm for s in stages.STAGES if run.runs(s)):
        await _open_client(run, opened)
    try:
        for spec in run.running(Position.RUN):  # once over the whole run's selected queries, before their batches
            if spec.on_run is not None:
                await spec.on_run(run, flow)
            else:
                once = run.record(spec, [await _step(run, spec, flow.selected)])[0]
                flow.selected = _same_queries(spec, flow.selected, once)
        flow.queries = []  # every query not selected is accounted for: from here on only the selected ones are held
        chains = await _chains(run, flow, in_batch)
    finally:
        if run.client is not None:
            run.state.usage_run = jsonable(run.client.usage())
        run.state.flush()
    if run.planning:
        return _planned(run, flow)
    for spec in in_batch:
        kept = run.record(spec, [c[spec.name] for c in chains])
        if spec.recorded is not None:
            spec.recorded(run, flow, kept)
        if spec.checks is not None:
            flow.checks[spec.name] = spec.checks(run.state.stage(spec.name).stats)
    releases = run.running(Position.RELEASE)
    if not releases:
        return _finished(run, flow)
    _final_flush(run)
    return _release(run, flow, releases[0], len(chains))


async def _chains(run: BuildRun, flow: Flow, in_batch: list[StageSpec]) -> list[dict[str, Timed]]:
    """Every batch of the selected queries through its chain (a bounded number at once); what the flow keeps of
    each batch's stages (their results without their records)."""
    batches = batched(flow.selected, run.cfg.run.batch_size)
    for spec in in_batch:  # a plan builds sets only for the stages on items, whose batches are not all known
        if spec.at is not Position.ITEMS and not (run.planning and spec.at is Position.SETS):
            run.progress.expect(spec.stage, len(batches))
    if not run.planning:
        set_parts.clear(run.paths.sets, keep=range(len(batches)))
    at_once = asyncio.Semaphore(_chains_at_once(run.cfg))
    on_items = run.running(Position.ITEMS)

    async def chain(index: int, queries: list[Query]) -> dict[str, Timed]:
        async with at_once:
            batch = Batch(index, queries)
            with _answered_by(run) as seen:
                verdicts = await _to_verdicts(run, batch)
            # A plan builds a batch's sets (kept nowhere) only for the stages on items, and only where every
            # reply they read is the build's own (no stand-in): then those stages ask what the build will.
            known = seen is None or (seen.asked > 0 and not seen.stand_ins)  # nothing seen: not known
            if verdicts and (not run.planning or (known and on_items)):
                for spec in run.running(Position.SETS):
                    assert spec.on_batch is not None, spec.name  # preflight: a stage at SETS has its hook
                    await spec.on_batch(run, batch)
                for spec in on_items:
                    batch.outcomes[spec.name] = await _on_items(run, spec, batch)
            elif verdicts:
                for spec in on_items:
                    if spec.bound is not None:
                        key = f"{spec.name}_calls_at_most"
                        flow.estimates[key] = flow.estimates.get(key, 0) + spec.bound(len(queries), run.cfg)
            kept = {k: _slim(t) for k, t in batch.outcomes.items()}  # the batch's records are on disk: drop them
            del batch
            give_back()
            return kept

    return list(await asyncio.gather(*(chain(i, b) for i, b in enumerate(batches))))


async def _to_verdicts(run: BuildRun, batch: Batch) -> bool:
    """One batch through the stages on queries and on answers, then the verdicts side by side; whether any
    verdict stage ran (the sets need them)."""
    for spec in run.running(Position.QUERIES):
        batch.outcomes[spec.name] = await _step(run, spec, batch.queries)
        batch.queries = _same_queries(spec, batch.queries, batch.outcomes[spec.name].value)
    for spec in run.running(Position.ANSWERS):
        if spec.on_batch is not None:
            await spec.on_batch(run, batch)
        else:
            batch.outcomes[spec.name] = await _step(run, spec, batch.queries, batch.answers)
            batch.answers = batch.outcomes[spec.name].value.records
    verdicts = run.running(Position.VERDICTS)
    if not verdicts:
        return False
    cfg, log, names = run.cfg, run.log, " + ".join(s.name for s in verdicts)
    judged = [s.takes(run.section(s), batch.answers) if s.takes else batch.answers for s in verdicts]
    log.info("%s: %d answers to %d queries started", names, len(judged[0]), len(batch.queries))
    steps = [_step(run, s, batch.queries, answers) for s, answers in zip(verdicts, judged)]
    endpoints = [e for s in verdicts if s.endpoints is not None for e in s.endpoints(run.section(s)) or ()]
    if _one_slot(cfg, *endpoints):
        # One request at a time on one server: interleaving the stages' prompts would throw away the server's
        # KV cache of the previous prompt's prefix (shared instructions, criteria, query) on every switch,
        # so run them one after the other.
        done = [await s for s in steps]
    else:
        done = list(await asyncio.gather(*steps))
    for spec, outcome in zip(verdicts, done):
        batch.outcomes[spec.name] = outcome
    got = ", ".join(f"{len(t.value.records)} {s.name}" for s, t in zip(verdicts, done))
    log.info("%s: batch of %d queries -> %s", names, len(batch.queries), got)
    return True


async def _on_items(run: BuildRun, spec: StageSpec, batch: Batch) -> Timed:
    """A stage on items over one batch's sets (what of them its spec ``takes``), its records kept beside them."""
    built = batch.sets
    done = await _step(run, spec, batch.queries, spec.takes(run.section(spec), built) if spec.takes else built)
    if not run.planning:
        set_parts.write_stage_part(run.paths.sets, spec.name, batch.index, done.value.records)
    return done


def _answered_by(run: BuildRun) -> contextlib.AbstractContextManager[Watched | None]:
    """In a dry run, what the planner answered within the block (``PlanningClient.watch``); else None."""
    return PlanningClient.watch() if run.planning else contextlib.nullcontext()


def _slim(t: Timed) -> Timed:
    """``t`` without its result's records (they are on disk, or in the later stages' results): its failures and
    stats are what the run keeps of the batch."""
    return dataclasses.replace(t, value=StageResult(None, tuple(t.value.failures), dict(t.value.stats)))


def _finished(run: BuildRun, flow: Flow) -> Summary:
    """The summary of a build that writes no release: what its stages counted (``Flow.result``)."""
    _final_flush(run)
    return {**flow.result, "run": str(run.paths.run)}


def _release(run: BuildRun, flow: Flow, spec: StageSpec, n_batches: int) -> Summary:
    """Write, audit and swap in the release from the merged batches' items (streamed, never all in memory)."""
    cfg, paths, state, checks = run.cfg, run.paths, run.state, flow.checks
    if not flow.result.get("pairwise") and not flow.result.get("bon"):
        made_by = ", ".join(f"stages.{s.name}.stats" for s in run.running(Position.SETS))
        raise RMBError(
            f"build {cfg.name!r}: no pairwise or BoN item could be built from {len(flow.selected)} queries "
            f"(why: {paths.run / 'summary.json'}, {made_by}; failures.jsonl)"
        )
    flow.selected = []
    entries: Iterator[Entry] = set_parts.merged(paths.sets, range(n_batches))
    with run.progress.step(spec.name):
        writers = [  # what the stages on items add to the release (their files, their checks)
            s.writes(set_parts.stage_parts(paths.sets, s.name, range(n_batches)), _section(checks, s.name))
            for s in run.running(Position.ITEMS)
            if s.writes is not None
        ]
        for writer in writers:
            entries = writer.watch(entries)
        for note in flow.release_notes:  # what stages over the run add to each item's annotations
            checks[note.check] = note.section
            entries = note.watch(entries)
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
            more_files=_written_by(writers) if writers else None,
        )
        # not a stage record (those count cached task batches): the release is written and audited every run
        _final_flush(
            run,
            {spec.name: store.stats.to_json()},
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


def _section(checks: dict[str, dict[str, Any] | None], name: str) -> dict[str, Any]:
    """Stage ``name``'s section of the manifest's checks, made here where it has none (a writer may add to it)."""
    section = checks.get(name)
    if section is None:
        section = checks[name] = {}
    return section


def _written_by(writers: list[ReleaseWriter]) -> Callable[[Path], None]:
    """The release's files that the stages on items write (``StageSpec.writes``), into its folder."""

    def write(folder: Path) -> None:
        for writer in writers:
            writer.write(folder)

    return write


def _final_flush(
    run: BuildRun,
    more_embeddings: dict[str, Mapping[str, object]] | None = None,
    release_seconds: float | None = None,
    **extra: object,
) -> None:
    """summary.json with the accounting and the build's embedding figures (``embeddings_section``:
    the stages', plus ``more_embeddings``, e.g. the release audit's); ``release_seconds`` also goes
    into its ``timing``."""
    state = run.state
    if release_seconds is not None:
        state.release_seconds = release_seconds
        extra["release_seconds"] = release_seconds
    totals = embeddings_section([s.to_json() for s in state.stages.values()], run.store(), **(more_embeddings or {}))
    state.flush(accounting=run.acc.to_json(), embeddings=totals, **extra)


def _planned(run: BuildRun, flow: Flow) -> Summary:
    """The dry run's result: the planner's report (``rmb_build.llm.planning``) of what the build's steps
    asked, plus ``exact`` (what each figure is) and ``estimates`` (what the plan cannot count)."""
    cfg = run.cfg
    planner = run.client or PlanningClient(cfg.endpoints)  # no LLM stage: an empty plan
    assert isinstance(planner, PlanningClient)  # a dry run's client
    estimates = dict(flow.estimates)
    report = planner.report()
    stand_ins = Counter(c.phase for c in planner.calls.values() if c.cached is None and planner.is_answer(c.request))
    on_items = sum(stand_ins[s.stage] for s in stages.at(Position.ITEMS))  # rewrites of items the plan stood in for
    verdicts = " and ".join(s.name for s in stages.at(Position.VERDICTS))
    estimate = {
        **report,
        "estimates": estimates,
        "exact": {
            "calls": (
                "exact"
                if not estimates and not stand_ins
                else "exact for what the cache answers"
                + (
                    f"; {verdicts} calls on answers not yet generated are an upper bound (an answer cut at "
                    "max_tokens is not judged)"
                    if sum(stand_ins.values()) > on_items
                    else ""
                )
                + "".join(s.plan_note(estimates, stand_ins[s.stage]) for s in stages.STAGES if s.plan_note)
            ),
            "prompt_tokens": "; ".join(f"{name}: {how}" for name, how in report["prompt_tokens_method"].items()),
            "completion_tokens": "upper bound: each call's max_tokens",
            "completion_tokens_estimate": "estimate: the mean of cached replies of the same endpoint, model and phase",
            "cost_usd": "upper bound: prompt estimate plus max_tokens at each endpoint's price_per_mtok",
        },
    }
    _final_flush(run, dry_run=True, estimate=estimate)
    return {"dry_run": True, "selected": len(flow.selected), "estimate": estimate, "run": str(run.paths.run)}


def _chains_at_once(cfg: BuildConfig) -> int:
    """Batches in their LLM chain at once: enough queued requests to fill every endpoint's slots
    twice over, at least 4; a bound that does not grow with the build (each chain's prompts and
    replies are in memory while it runs)."""
    # shared servers, each taking its slots at once (a torch server decodes max_batch requests together)
    embedded = max((ep.servers * ep.server_slots for ep in cfg.endpoints.values() if ep.embedded), default=0)
    slots = embedded + sum(ep.max_concurrency or 8 for ep in cfg.endpoints.values() if not ep.embedded)
    return max(4, -(-2 * slots // cfg.run.batch_size))


def _one_slot(cfg: BuildConfig, *endpoint_names: str) -> bool:
    """True when the endpoints are one server that answers one request at a time (the embedded one on
    llama.cpp; a torch server decodes several together)."""
    eps = [cfg.endpoints[name] for name in endpoint_names]
    if all(ep.embedded for ep in eps):  # every embedded model is served by the same process(es)
        return max(ep.servers * ep.server_slots for ep in cfg.endpoints.values() if ep.embedded) == 1
    return len({ep.base_url for ep in eps}) == 1 and all(ep.max_concurrency == 1 for ep in eps)
