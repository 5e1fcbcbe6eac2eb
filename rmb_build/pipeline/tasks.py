"""Prefect tasks: each wraps one batch function (``batches.py``) over one batch, never one item.

Every task is cached under the explicit key the build computes (``keys.py``) and persists its result
to the run folder (``bind_storage``), so a build started again after a kill reloads every finished
batch instead of redoing it. A task stamps its result with the flow run that computed it (another
run's id on a reloaded result means a cache hit). Only ``runner.PrefectRunner`` uses these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from rmb_build.pipeline import batches as B
from rmb_build.pipeline.batches import Timed
from rmb_build.pipeline.keys import by_cache_key

# Results go to the run folder, not also to Prefect's in-memory result cache (up to 1,000 records
# kept for the whole flow run: every batch's answers, scores and items of the build, in memory).
CACHED = dict(cache_key_fn=by_cache_key, persist_result=True, cache_result_in_memory=False)


def _stamp(timed: Timed) -> Timed:
    timed.flow_run_id = flow_run.get_id()
    return timed


@task(name="gather", **CACHED)
def gather_task(cache_key: str, sources: Any, quarantine_path: str, limit: int | None) -> Timed:
    return _stamp(B.gather_batch(cache_key, sources, quarantine_path, limit))


@task(name="dedup", **CACHED)
def dedup_task(cache_key: str, queries: Any, dedup_cfg: Any, embeddings: Any, store_dir: str) -> Timed:
    return _stamp(B.dedup_batch(cache_key, queries, dedup_cfg, embeddings, store_dir))


@task(name="embed", cache_policy=NO_CACHE, persist_result=False, cache_result_in_memory=False)
def embed_task(texts: Any, embeddings: Any, store_dir: str) -> Timed:
    """The embedding store is this task's cache, so it persists nothing else."""
    return _stamp(B.embed_batch(texts, embeddings, store_dir))


@task(name="classify", **CACHED)
def classify_task(cache_key: str, queries: Any, classifier_cfg: Any, embeddings: Any, store_dir: str) -> Timed:
    return _stamp(B.classify_batch(cache_key, queries, classifier_cfg, embeddings, store_dir))


@task(name="classify_llm", **CACHED)
async def llm_classify_task(
    cache_key: str, queries: Any, classifier_cfg: Any, client: Any, embeddings: Any, store_dir: str
) -> Timed:
    return _stamp(await B.classify_llm_batch(cache_key, queries, classifier_cfg, client, embeddings, store_dir))


@task(name="generate", **CACHED)
async def generate_task(cache_key: str, queries: Any, generators: Any, client: Any) -> Timed:
    return _stamp(await B.generate_batch(cache_key, queries, generators, client))


@task(name="judge", **CACHED)
async def judge_task(cache_key: str, queries: Any, responses: Any, judge_cfg: Any, client: Any) -> Timed:
    return _stamp(await B.judge_batch(cache_key, queries, responses, judge_cfg, client))


@task(name="guard", **CACHED)
async def guard_task(cache_key: str, queries: Any, responses: Any, guard_cfg: Any, client: Any) -> Timed:
    return _stamp(await B.guard_batch(cache_key, queries, responses, guard_cfg, client))


@task(name="build_sets", **CACHED)
def build_sets_task(cache_key: str, queries: Any, responses: Any, scores: Any, labels: Any, sets_cfg: Any) -> Timed:
    return _stamp(B.build_sets_batch(cache_key, queries, responses, scores, labels, sets_cfg))


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
    """The tasks by stage name, their results persisted under ``storage`` (a folder in the run's folder)."""
    return {t.name: t.with_options(result_storage=storage) for t in ALL_TASKS}
