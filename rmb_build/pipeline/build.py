"""The build: gather -> dedup -> classify -> select -> generate -> judge + guard -> build sets -> release.

Plain Python over the stage functions: batching, the chains of LLM stages, goal routing, planning
(``--dry-run``), the gold check and resume are decided here; a runner (``runner.py``: in-process, or
Prefect) executes each batch under its cache key, and a batch already computed comes back from it.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from rmb_build.core import paths as P
from rmb_build.core.errors import RMBError
from rmb_build.core.jsonable import jsonable
from rmb_build.core.memory import give_back, thaw
from rmb_build.core.paths import BuildPaths
from rmb_build.core.text import search_text
from rmb_build.llm import LLMClient
from rmb_build.pipeline import keys as K
from rmb_build.pipeline import label_checks, set_parts, steps
from rmb_build.pipeline.batches import Timed, build_classifier, open_store
from rmb_build.pipeline.config import BuildConfig
from rmb_build.pipeline.manifest import Accounting, embeddings_section, sources_section
from rmb_build.pipeline.preflight import preflight
from rmb_build.pipeline.release_step import write_built_release
from rmb_build.pipeline.run_state import RunState, merge_stats
from rmb_build.pipeline.runner import Runner
from rmb_build.stages import harm_evidence, route
from rmb_build.stages.classify import classifier_text, default_training_set
from rmb_build.stages.select import select, short_goals
from rmb_build.stages.sets import finished


def batched(items: Sequence[Any], size: int) -> list[list[Any]]:
    """``items`` in batches of ``size`` (one empty batch for no items, so every stage still reports)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


class _Recorder:
    """Adds task outcomes to the run state: seconds of work only for batches computed in this run."""

    def __init__(self, state: RunState, log: Any, run_id: str):
        self.state, self.log, self.run_id = state, log, run_id

    def __call__(self, stage: str, outcomes: Sequence[Timed]) -> list[Any]:
        rec = self.state.stage(stage)
        embedded = []
        for t in outcomes:
            rec.batches += 1
            if t.flow_run_id != self.run_id:
                rec.cached_batches += 1
            else:
                self.state.add_work(stage, t.started, t.seconds)
                embedded.append(getattr(t, "embeddings", None) or {})
            self.state.add_failures(getattr(t.value, "failures", None) or ())
        rec.stats = merge_stats([rec.stats, *(steps.stats_of(t.value) for t in outcomes)])
        if any(embedded):  # the embedding store's figures, for batches computed in this run
            rec.stats["embeddings"] = merge_stats([rec.stats.get("embeddings") or {}, *embedded])
        cached = f" ({rec.cached_batches} from cache)" if rec.cached_batches else ""
        self.log.info("%s: %d batch(es)%s: %s", stage, len(outcomes), cached, steps.brief(rec.stats))
        self.state.flush()
        give_back()
        return [t.value for t in outcomes]


EMBED_BATCH = 512  # texts per embedding task on a Dask cluster


def _uses_llm(cfg: BuildConfig, stages: Sequence[str]) -> bool:
    return "generate" in stages or ("classify" in stages and cfg.classifier.method == "llm")


async def run_pipeline(
    cfg: BuildConfig,
    runner: Runner,
    workdir: str | os.PathLike | None = None,
    *,
    config_file: str = "<config>",
    max_cost: float | None = None,
    dry_run: bool = False,
    min_gold_agreement: float | None = None,
) -> dict[str, Any]:
    """Build the release ``cfg`` describes, every batch through ``runner``; returns the run summary.

    ``dry_run`` stops after selection and returns the estimated LLM cost instead of calling any model:
    the requests the stages plan, sent nowhere (LLM classification answers only from the cache, and
    the embedding classifier stands in for the rest).
    ``min_gold_agreement`` stops before generation when the judge agrees less with ``judge.gold``.
    """
    stages = preflight(cfg, config_file)
    paths = BuildPaths.of(cfg.name, workdir)
    state = RunState(paths.run)
    log = runner.log
    record = _Recorder(state, log, runner.run_id)
    log.info("build %r: stages %s; working state in %s", cfg.name, ", ".join(stages), paths.run)

    try:
        queries, acc = _gather_and_dedup(cfg, stages, paths, record, runner)
        limit = max_cost if max_cost is not None else cfg.run.max_cost
        # One client for every LLM call of the build (classification included): one cache, one budget,
        # one usage total; a dry run's client answers from the cache only and sends nothing.
        client = (
            LLMClient(cfg.endpoints, cache_dir=paths.llm_cache, max_cost=limit, offline=dry_run)
            if _uses_llm(cfg, stages)
            else None
        )
        pool = [queries]  # handed over, not kept here: the flow's frame would hold every query to the end
        del queries
        async with client if client is not None else contextlib.nullcontext():
            return await _from_classify(
                cfg, stages, paths, state, acc, log, record, runner, pool, client, dry_run, min_gold_agreement
            )
    finally:
        thaw()  # give_back froze what it kept between stages


def _gather_and_dedup(
    cfg: BuildConfig, stages: list[str], paths: BuildPaths, record: _Recorder, runner: Runner
) -> tuple[list[Any], Accounting]:
    """The gathered queries (written to the raw folder), less duplicates; the accounting so far."""
    gathered = record(
        "gather",
        [runner.call("gather", K.gather_key(cfg), cfg.sources, str(paths.raw / P.QUARANTINE), cfg.run.max_queries)],
    )[0]
    raw = paths.raw / P.RAW_QUERIES
    steps.write_queries_file(gathered.queries, raw)
    acc = Accounting(gathered=len(gathered.queries), sources=sources_section(cfg, gathered.stats))
    if "dedup" not in stages:
        return gathered.queries, acc
    texts = [search_text(q.conversation) for q in gathered.queries]
    del gathered  # on disk now: the encoder's pass, the build's peak of memory, runs without the queries
    _embed_on_runner(cfg, paths, runner, record, texts)
    del texts
    queries = steps.read_queries_file(raw)
    deduped = record(
        "dedup",
        [
            runner.submit(
                "dedup", K.dedup_key(cfg, queries), queries, cfg.dedup, cfg.embeddings, str(paths.embeddings)
            ).result()
        ],
    )[0]
    acc.dedup_removed = steps.count_by(deduped.removed, "kind")
    return deduped.kept, acc


async def _from_classify(
    cfg: BuildConfig,
    stages: list[str],
    paths: BuildPaths,
    state: RunState,
    acc: Accounting,
    log: Any,
    record: _Recorder,
    runner: Runner,
    pool: list[list[Any]],
    client: Any,
    dry_run: bool,
    min_gold_agreement: float | None = None,
) -> dict[str, Any]:
    """Classify, select, then the LLM stages and the release, all through ``client``. ``pool`` holds
    the deduplicated queries; it is emptied, so that they are freed once selection and routing are done."""
    size = cfg.run.batch_size
    if "classify" not in stages:
        to_classify = queries = pool.pop()
    elif cfg.classifier.method == "llm":
        to_classify = queries = pool.pop()
        runs = [
            runner.acall(
                "classify_llm",
                K.classify_key(cfg, b, offline=dry_run),
                b,
                cfg.classifier,
                client,
                cfg.embeddings,
                str(paths.embeddings),
            )
            for b in batched(queries, size)
        ]
        queries = [q for part in record("classify", await asyncio.gather(*runs)) for q in part]
    else:
        to_classify, queries = _classify_on_runner(cfg, paths, runner, record, pool)
    queries, harm = _harm_evidence(cfg, stages, paths, queries)
    log.info(
        "harm evidence: %d classified harmful, %d kept (P(harm) >= %.2f), turned away %s",
        harm["classified_harmful"],
        harm["kept"],
        harm["threshold"],
        harm["turned_away"] or "none",
    )
    selected = _select(cfg, paths, acc, log, queries)
    if dry_run:
        return await _dry_run(cfg, stages, paths, state, acc, to_classify, queries, selected)
    del to_classify
    if "generate" not in stages:
        _final_flush(cfg, paths, state, acc)
        return {"selected": len(selected), "run": str(paths.run)}

    checks: dict[str, Any] = {"harm_evidence": harm_evidence.section(harm)}
    routing = None
    sets_dir = paths.sets
    try:
        # --- label checks before generation (rmb_build/pipeline/label_checks.py): judge vs gold, guard routing ---
        checks["gold"] = await label_checks.check_gold(cfg, client, state, log, min_gold_agreement)
        if cfg.route.enabled and "guard" in stages:
            selected, acc.not_selected, routing = await label_checks.route_by_guard(
                cfg, queries, selected, acc.not_selected, client, state, log, str(paths.embeddings), checks["gold"]
            )
            acc.selected = len(selected)
            acc.short_goals = short_goals(selected, queries, cfg.select.min_per_goal, cfg.scenarios)
            steps.write_queries_file(selected, paths.run / P.SELECTED_QUERIES)
        # --- end of label checks ---
        del queries  # every query not selected is accounted for: from here on only the selected ones are held
        batches = batched(selected, size)
        set_parts.clear(sets_dir, keep=range(len(batches)))
        at_once = asyncio.Semaphore(_chains_at_once(cfg))

        async def chain(index: int, batch: list[Any]) -> tuple[Timed, ...]:
            async with at_once:
                outcomes = await _llm_chain(runner, cfg, stages, batch, client, log)
                if outcomes[1] is not None:
                    outcomes = (*outcomes, _sets_of_batch(runner, cfg, acc, sets_dir, index, batch, *outcomes))
                kept = tuple(_slim(t) for t in outcomes)  # the batch's records are on disk: drop them here
                del outcomes
                give_back()
                return kept

        chains = await asyncio.gather(*(chain(i, b) for i, b in enumerate(batches)))
    finally:
        state.usage_run = jsonable(client.usage())
        state.flush()
    responses = sum(part.count for part in record("generate", [c[0] for c in chains]))
    if "judge" not in stages:
        _final_flush(cfg, paths, state, acc)
        return {"selected": len(selected), "responses": responses, "run": str(paths.run)}
    record("judge", [c[1] for c in chains])
    record("guard", [c[2] for c in chains])
    record("build_sets", [c[3] for c in chains])
    counts = state.stage("build_sets").stats
    acc.finish(len(selected) * len(cfg.generators), state.failure_counts().get("generate", 0))
    _final_flush(cfg, paths, state, acc)
    if "release" not in stages:
        return {
            "selected": len(selected),
            "pairwise": counts.get("pairwise", 0),
            "bon": counts.get("bon", 0),
            "run": str(paths.run),
        }
    if not counts.get("pairwise") and not counts.get("bon"):
        raise RMBError(
            f"build {cfg.name!r}: no pairwise or BoN item could be built from {len(selected)} queries "
            f"(why: {paths.run / 'summary.json'}, stages.build_sets.stats; failures.jsonl)"
        )
    n_batches = len(batches)
    del selected, batches, chains
    return _release(cfg, paths, state, acc, log, checks, routing, set_parts.merged(sets_dir, range(n_batches)))


def _sets_of_batch(
    runner: Runner,
    cfg: BuildConfig,
    acc: Accounting,
    sets_dir: Path,
    index: int,
    batch: list[Any],
    gen: Timed,
    judged: Timed,
    guarded: Timed,
) -> Timed:
    """One judged and guarded batch's pairwise and BoN items, kept in ``sets_dir`` (``set_parts``)
    and counted in ``acc``."""
    responses, scores, labels = gen.value.records, judged.value.records, guarded.value.records
    batch = steps.apply_guard_scenarios(batch, labels)
    built = runner.call(
        "build_sets", K.sets_key(cfg, batch, responses, scores, labels), batch, responses, scores, labels, cfg.sets
    )
    set_parts.write_part(sets_dir, index, built.value)
    acc.add_batch(batch, responses, scores, [*built.value.pairwise, *built.value.bon])
    return built


@dataclass(frozen=True)
class _Done:
    """What the flow keeps of a finished batch's stage result: its stats, failures and record count."""

    stats: dict[str, Any]
    failures: tuple[Any, ...]
    count: int


def _slim(t: Timed | None) -> Timed | None:
    if t is None:
        return None
    v = t.value
    return dataclasses.replace(
        t,
        value=_Done(
            steps.stats_of(v), tuple(getattr(v, "failures", None) or ()), len(getattr(v, "records", None) or ())
        ),
    )


def _release(
    cfg: BuildConfig,
    paths: BuildPaths,
    state: RunState,
    acc: Accounting,
    log: Any,
    checks: dict[str, Any],
    routing: Any,
    entries: Iterator[tuple[Any, dict]],
) -> dict[str, Any]:
    """Write, audit and swap in the release from the merged batches' items (streamed, never all in memory)."""
    if routing is not None:  # goal routing (rmb_build.stages.route): goal_from per item, counts in the manifest
        summary = route.ItemSummary()  # its counts fill in as the release is written, before the manifest
        checks["routing"] = {"scope": cfg.route.scope, "queries": routing.stats(), "items": summary.counts}
        entries = (
            (item, summary.add({**note, **route.routing_fields(note, routing.decisions)})) for item, note in entries
        )
    store, started = open_store(cfg.embeddings, paths.embeddings), time.perf_counter()
    manifest = write_built_release(
        cfg,
        entries,
        paths.release,
        checks={k: v for k, v in checks.items() if v is not None},
        accounting=acc,
        stages=[s.to_json() for s in state.stages.values()],
        failures=state.failure_counts(),
        usage=state.usage_total(),
        log=log.info,
        embed=store,
    )
    # not a stage record (those count cached task batches): the release is written and audited every run
    _final_flush(
        cfg,
        paths,
        state,
        acc,
        {"release": store.stats.to_json()},
        release=str(paths.release),
        release_seconds=round(time.perf_counter() - started, 3),
    )
    log.info("release written to %s: %s", paths.release, manifest["counts"]["items"])
    return {
        "release": str(paths.release),
        "run": str(paths.run),
        "counts": manifest["counts"],
        "accounting": manifest["accounting"],
        "audit": manifest["audit"].get("counts", {}),
        "failures": manifest["failures"],
        "stages": manifest["stages"],
    }


def _classify_on_runner(
    cfg: BuildConfig, paths: BuildPaths, runner: Runner, record: _Recorder, pool: list[list[Any]]
) -> tuple[list[Any], list[Any]]:
    """The embedding classifier over batches on the configured task runner: (the queries as given,
    classified). ``pool`` holds the queries; they wait in the run folder while the encoder runs
    (its pass is the build's peak of memory) and are read back for the batches."""
    queries = pool.pop()
    texts = [classifier_text(q.conversation) for q in queries]
    deduped = paths.run / P.DEDUPED_QUERIES
    steps.write_queries_file(queries, deduped)
    del queries
    _embed_on_runner(
        cfg, paths, runner, record, texts + (default_training_set()[0] if not cfg.classifier.train_release else [])
    )
    del texts
    queries = steps.read_queries_file(deduped)
    futures = [
        runner.submit("classify", K.classify_key(cfg, b), b, cfg.classifier, cfg.embeddings, str(paths.embeddings))
        for b in batched(queries, cfg.run.batch_size)
    ]
    return queries, [q for part in record("classify", [f.result() for f in futures]) for q in part]


def _embed_on_runner(cfg: BuildConfig, paths: BuildPaths, runner: Runner, record: _Recorder, texts: list[str]) -> None:
    """Embed ``texts`` into the build's store before the stage's own batches, which then find every
    vector there. On a Dask cluster: batch tasks the workers share (each worker would otherwise embed
    what it needs by itself, the classifier's training examples on every worker). On the thread
    runner: one call in this thread, so the stage's concurrent batches never run two encoders at
    once (measured: two encoders in one process peak 100-170 MB higher and are no faster on 2 cores)."""
    distinct = sorted(dict.fromkeys(texts), key=len)  # length-sorted batches pad least
    if cfg.run.task_runner != "dask":
        record("embed", [runner.call("embed", distinct, cfg.embeddings, str(paths.embeddings))])
        return
    futures = [runner.submit("embed", b, cfg.embeddings, str(paths.embeddings)) for b in batched(distinct, EMBED_BATCH)]
    record("embed", [f.result() for f in futures])


def _final_flush(
    cfg: BuildConfig,
    paths: BuildPaths,
    state: RunState,
    acc: Accounting,
    more_embeddings: dict[str, Any] | None = None,
    **extra: Any,
) -> None:
    """summary.json with the accounting and the build's embedding figures (``embeddings_section``:
    the stages', plus ``more_embeddings``, e.g. the release audit's); ``release_seconds`` also goes
    into its ``timing``."""
    state.release_seconds = extra.get("release_seconds", state.release_seconds)
    totals = embeddings_section(
        [s.to_json() for s in state.stages.values()],
        open_store(cfg.embeddings, paths.embeddings),
        **(more_embeddings or {}),
    )
    state.flush(accounting=acc.to_json(), embeddings=totals, **extra)


def _harm_evidence(
    cfg: BuildConfig, stages: list[str], paths: BuildPaths, queries: list[Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Classified harmlessness labels without measured evidence turned away (``rmb_build.stages.harm_evidence``),
    by the build's embedding classifier over the vectors classification stored. Labels a source gave (no
    classify stage) are the source's, and pass, as do a label set's (people's) labels."""
    if "classify" not in stages:
        return queries, harm_evidence.unclassified(queries)
    clf = build_classifier(cfg.classifier.train_release, cfg.embeddings, open_store(cfg.embeddings, paths.embeddings))
    return harm_evidence.require_evidence(queries, clf, cfg.classifier.harm_from_classifier)


def _select(cfg: BuildConfig, paths: BuildPaths, acc: Accounting, log: Any, queries: list[Any]) -> list[Any]:
    selected, acc.not_selected = select(queries, cfg.select, cfg.scenarios)
    acc.selected = len(selected)
    acc.short_goals = short_goals(selected, queries, cfg.select.min_per_goal, cfg.scenarios)
    steps.write_queries_file(selected, paths.run / P.SELECTED_QUERIES)
    log.info("selected %d of %d queries: %s", len(selected), len(queries), steps.goal_counts(selected))
    return selected


async def _dry_run(
    cfg: BuildConfig,
    stages: list[str],
    paths: BuildPaths,
    state: RunState,
    acc: Accounting,
    to_classify: list[Any],
    queries: list[Any],
    selected: list[Any],
) -> dict[str, Any]:
    """What a build of ``selected`` sends: its stages, run in order against the run's cache (``PlanningClient``)."""
    from rmb_build.llm.cache import ResponseCache

    cache = ResponseCache(paths.llm_cache, create=False) if paths.llm_cache.exists() else None
    try:
        estimate = await steps.plan_build(
            cfg, stages, to_classify, queries, selected, dict(acc.not_selected), cache, str(paths.embeddings)
        )
    finally:
        if cache is not None:
            cache.close()
    _final_flush(cfg, paths, state, acc, dry_run=True, estimate=estimate)
    return {"dry_run": True, "selected": len(selected), "estimate": estimate, "run": str(paths.run)}


async def _llm_chain(
    runner: Runner, cfg: BuildConfig, stages: list[str], batch: list[Any], client: Any, log: Any
) -> tuple[Timed, Timed | None, Timed | None]:
    """One batch through generate, then judge and guard side by side."""
    log.info("generate: batch of %d queries x %d generators started", len(batch), len(cfg.generators))
    gen = await runner.acall("generate", K.generate_key(cfg, batch), batch, cfg.generators, client)
    log.info("generate: batch of %d queries -> %d answers", len(batch), len(gen.value.records))
    if "judge" not in stages:
        return gen, None, None
    answers = finished(gen.value.records)  # an answer cut at max_tokens never reaches a release: not judged
    log.info("judge + guard: %d answers to %d queries started", len(answers), len(batch))
    judge_run = runner.acall("judge", K.judge_key(cfg, batch, answers), batch, answers, cfg.judge, client)
    guard_run = runner.acall("guard", K.guard_key(cfg, batch, answers), batch, answers, cfg.guard, client)
    if _one_slot(cfg, cfg.judge.endpoint, cfg.guard.endpoint):
        # One request at a time on one server: interleaving judge and guard prompts would throw away
        # the server's KV cache of the previous prompt's prefix (shared instructions, criteria, query)
        # on every switch, so run them one after the other.
        judged = await judge_run
        guarded = await guard_run
    else:
        judged, guarded = await asyncio.gather(judge_run, guard_run)
    log.info(
        "judge + guard: batch of %d queries -> %d scores, %d guard labels",
        len(batch),
        len(judged.value.records),
        len(guarded.value.records),
    )
    return gen, judged, guarded


def _chains_at_once(cfg: BuildConfig) -> int:
    """Batches in their LLM chain at once: enough queued requests to fill every endpoint's slots
    twice over, at least 4; a bound that does not grow with the build (each chain's prompts and
    replies are in memory while it runs)."""
    slots = sum(1 if ep.embedded else (ep.max_concurrency or 8) for ep in cfg.endpoints.values())
    return max(4, -(-2 * slots // cfg.run.batch_size))


def _one_slot(cfg: BuildConfig, *endpoint_names: str) -> bool:
    """True when the endpoints are one server that answers one request at a time (the embedded one)."""
    eps = [cfg.endpoints[name] for name in endpoint_names]
    if all(ep.embedded for ep in eps):
        return True  # every embedded model is served by one llama.cpp process
    return len({ep.base_url for ep in eps}) == 1 and all(ep.max_concurrency == 1 for ep in eps)
