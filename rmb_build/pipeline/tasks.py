"""Prefect tasks: each wraps one stage function over one batch (100-1,000 queries), never one item.

Every task is cached under an explicit key the flow computes (``keys.py``) and persists its result
to the run folder (the flow sets ``result_storage``), so a build started again after a kill reloads
every finished batch instead of redoing it. Tasks return a :class:`Timed`: the stage's own result,
the seconds its work took and the flow run that computed it (another run's id means a cache hit).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from rmb_build.embed.encoder import store_for
from rmb_build.pipeline.keys import by_cache_key
from rmb_build.stages.classify import LLMClassifier, apply_predictions, classify, embedding_classifier
from rmb_build.stages.common import ask
from rmb_build.stages.dedup import dedup
from rmb_build.stages.gather import gather
from rmb_build.stages.generate import generate
from rmb_build.stages.guard import guard
from rmb_build.stages.judge import judge
from rmb_build.stages.sets import build_sets

# Results go to the run folder, not also to Prefect's in-memory result cache (up to 1,000 records
# kept for the whole flow run: every batch's answers, scores and items of the build, in memory).
CACHED = dict(cache_key_fn=by_cache_key, persist_result=True, cache_result_in_memory=False)


@dataclass
class Timed:
    value: Any
    seconds: float
    flow_run_id: str | None
    started: float = 0.0  # epoch seconds: the work's span is [started, started + seconds]
    embeddings: dict[str, Any] | None = None  # the embedding store's stats for this work (StoreStats.to_json)


def _timed(start: float, value: Any, store: Any = None) -> Timed:
    seconds = time.perf_counter() - start
    figures = store.stats.to_json() if store is not None else None
    return Timed(value, seconds, flow_run.get_id(), time.time() - seconds, figures)


def open_store(embeddings: Any, folder: str | Path) -> Any:
    """The build's embedding store (``EmbeddingsConfig`` ``embeddings``) in ``folder``: a new object per
    task, so that its stats are that task's; every object and process shares the folder's vectors."""
    return store_for(folder, embeddings.model, embeddings.backend, embeddings.dtype)


@task(name="gather", **CACHED)
def gather_task(cache_key: str, sources: Sequence[Any], quarantine_path: str, limit: int | None) -> Timed:
    t = time.perf_counter()
    return _timed(t, gather(sources, quarantine_path=quarantine_path, limit=limit))


@task(name="dedup", **CACHED)
def dedup_task(cache_key: str, queries: Sequence[Any], dedup_cfg: Any, embeddings: Any, store_dir: str) -> Timed:
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    return _timed(t, dedup(queries, dedup_cfg, embed=store), store)


def build_classifier(train_release: str | None, embeddings: Any = None, embed: Any = None) -> Any:
    """The build's embedding classifier: on ``embeddings``' encoder (``EmbeddingsConfig``; None: the
    default one), its vectors from ``embed`` (the build's store) when given."""
    if embeddings is None:
        return embedding_classifier(train_release)
    return embedding_classifier(train_release, embeddings.model, embeddings.backend, embed)


@task(name="embed", cache_policy=NO_CACHE, persist_result=False, cache_result_in_memory=False)
def embed_task(texts: Sequence[str], embeddings: Any, store_dir: str) -> Timed:
    """Embed ``texts`` into the build's store (``EmbeddingsConfig`` ``embeddings``, in ``store_dir``):
    the store is this task's cache, so it persists nothing else."""
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    store.add(texts)  # fills the store; reading every row back would cost a copy of them all
    return _timed(t, {"texts": len(texts)}, store)


@task(name="classify", **CACHED)
def classify_task(
    cache_key: str, queries: Sequence[Any], classifier_cfg: Any, embeddings: Any, store_dir: str
) -> Timed:
    """The offline embedding classifier."""
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    clf = build_classifier(classifier_cfg.train_release, embeddings, store)
    return _timed(t, classify(queries, clf, classifier_cfg.min_confidence), store)


@task(name="classify_llm", **CACHED)
async def llm_classify_task(
    cache_key: str, queries: Sequence[Any], classifier_cfg: Any, client: Any, embeddings: Any, store_dir: str
) -> Timed:
    """The LLM classifier through the build's client (the embedding one for unusable replies)."""
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    fallback = await asyncio.to_thread(build_classifier, classifier_cfg.train_release, embeddings, store)
    clf = LLMClassifier(client, classifier_cfg.endpoint, classifier_cfg.model, fallback=fallback)
    results = await ask(client, clf.plan(queries), desc=clf.STAGE)
    preds = await asyncio.to_thread(clf.collect, queries, results)  # the fallback encodes on the CPU
    return _timed(t, apply_predictions(queries, preds, classifier_cfg.min_confidence), store)


@task(name="generate", **CACHED)
async def generate_task(cache_key: str, queries: Sequence[Any], generators: Sequence[Any], client: Any) -> Timed:
    t = time.perf_counter()
    return _timed(t, await generate(queries, generators, client))


@task(name="judge", **CACHED)
async def judge_task(
    cache_key: str, queries: Sequence[Any], responses: Sequence[Any], judge_cfg: Any, client: Any
) -> Timed:
    t = time.perf_counter()
    return _timed(t, await judge(queries, responses, judge_cfg, client))


@task(name="guard", **CACHED)
async def guard_task(
    cache_key: str, queries: Sequence[Any], responses: Sequence[Any], guard_cfg: Any, client: Any
) -> Timed:
    t = time.perf_counter()
    return _timed(t, await guard(queries, responses, guard_cfg, client))


@task(name="build_sets", **CACHED)
def build_sets_task(
    cache_key: str,
    queries: Sequence[Any],
    responses: Sequence[Any],
    scores: Sequence[Any],
    labels: Sequence[Any],
    sets_cfg: Any,
) -> Timed:
    t = time.perf_counter()
    return _timed(t, build_sets(queries, responses, scores, labels, sets_cfg))


ALL_TASKS = (
    gather_task,
    embed_task,
    dedup_task,
    classify_task,
    llm_classify_task,
    generate_task,
    judge_task,
    guard_task,
    build_sets_task,
)


def bind_storage(storage: Path) -> dict[str, Any]:
    """The tasks by name, their results persisted under ``storage`` (a folder in the run's folder)."""
    return {t.name: t.with_options(result_storage=storage) for t in ALL_TASKS}
