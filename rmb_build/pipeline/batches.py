"""The build's units of work: one stage function over one batch of queries, timed.

Each takes its cache key first (the runner caches its result under it; ``embed`` has none: the
embedding store is its cache) and returns a :class:`Timed`: the stage's result, the seconds the work
took, and (stamped by the runner that computed it) the run that did, so that a result reloaded from
an earlier run counts as cached. Plain functions: a runner (``runner.py``) decides where they run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rmb_build.embed.encoder import store_for
from rmb_build.stages.classify import LLMClassifier, apply_predictions, classify, embedding_classifier
from rmb_build.stages.common import ask
from rmb_build.stages.dedup import dedup
from rmb_build.stages.gather import gather
from rmb_build.stages.generate import generate
from rmb_build.stages.guard import guard
from rmb_build.stages.judge import judge
from rmb_build.stages.sets import build_sets


@dataclass
class Timed:
    value: Any
    seconds: float
    flow_run_id: str | None  # the run that computed it (stamped by the runner)
    started: float = 0.0  # epoch seconds: the work's span is [started, started + seconds]
    embeddings: dict[str, Any] | None = None  # the embedding store's stats for this work (StoreStats.to_json)


def _timed(start: float, value: Any, store: Any = None) -> Timed:
    seconds = time.perf_counter() - start
    figures = store.stats.to_json() if store is not None else None
    return Timed(value, seconds, None, time.time() - seconds, figures)


def open_store(embeddings: Any, folder: str | Path) -> Any:
    """The build's embedding store (``EmbeddingsConfig`` ``embeddings``) in ``folder``: a new object per
    batch, so that its stats are that batch's; every object and process shares the folder's vectors."""
    return store_for(folder, embeddings.model, embeddings.backend, embeddings.dtype)


def build_classifier(train_release: str | None, embeddings: Any = None, embed: Any = None) -> Any:
    """The build's embedding classifier: on ``embeddings``' encoder (``EmbeddingsConfig``; None: the
    default one), its vectors from ``embed`` (the build's store) when given."""
    if embeddings is None:
        return embedding_classifier(train_release)
    return embedding_classifier(train_release, embeddings.model, embeddings.backend, embed)


def gather_batch(cache_key: str, sources: Sequence[Any], quarantine_path: str, limit: int | None) -> Timed:
    t = time.perf_counter()
    return _timed(t, gather(sources, quarantine_path=quarantine_path, limit=limit))


def dedup_batch(cache_key: str, queries: Sequence[Any], dedup_cfg: Any, embeddings: Any, store_dir: str) -> Timed:
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    return _timed(t, dedup(queries, dedup_cfg, embed=store), store)


def embed_batch(texts: Sequence[str], embeddings: Any, store_dir: str) -> Timed:
    """Embed ``texts`` into the build's store (``EmbeddingsConfig`` ``embeddings``, in ``store_dir``)."""
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    store.add(texts)  # fills the store; reading every row back would cost a copy of them all
    return _timed(t, {"texts": len(texts)}, store)


def classify_batch(
    cache_key: str, queries: Sequence[Any], classifier_cfg: Any, embeddings: Any, store_dir: str
) -> Timed:
    """The offline embedding classifier."""
    t = time.perf_counter()
    store = open_store(embeddings, store_dir)
    clf = build_classifier(classifier_cfg.train_release, embeddings, store)
    return _timed(t, classify(queries, clf, classifier_cfg.min_confidence), store)


async def classify_llm_batch(
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


async def generate_batch(cache_key: str, queries: Sequence[Any], generators: Sequence[Any], client: Any) -> Timed:
    t = time.perf_counter()
    return _timed(t, await generate(queries, generators, client))


async def judge_batch(
    cache_key: str, queries: Sequence[Any], responses: Sequence[Any], judge_cfg: Any, client: Any
) -> Timed:
    t = time.perf_counter()
    return _timed(t, await judge(queries, responses, judge_cfg, client))


async def guard_batch(
    cache_key: str, queries: Sequence[Any], responses: Sequence[Any], guard_cfg: Any, client: Any
) -> Timed:
    t = time.perf_counter()
    return _timed(t, await guard(queries, responses, guard_cfg, client))


def build_sets_batch(
    cache_key: str,
    queries: Sequence[Any],
    responses: Sequence[Any],
    scores: Sequence[Any],
    labels: Sequence[Any],
    sets_cfg: Any,
) -> Timed:
    t = time.perf_counter()
    return _timed(t, build_sets(queries, responses, scores, labels, sets_cfg))


# stage name -> its batch function (the runner's table; ``embed`` has no cache key)
BATCHES = {
    "gather": gather_batch,
    "embed": embed_batch,
    "dedup": dedup_batch,
    "classify": classify_batch,
    "classify_llm": classify_llm_batch,
    "generate": generate_batch,
    "judge": judge_batch,
    "guard": guard_batch,
    "build_sets": build_sets_batch,
}
UNCACHED = frozenset({"embed"})
