"""The ``embed`` stage: texts into the build's embedding store before the stages that read them
(``dedup``, ``classify``), so that concurrent batches, or a Dask cluster's workers, find every vector
there. Uncached: the store is its cache. :func:`embedded_first` is how a stage whose spec says what it
``embeds`` gets them embedded before its own batches."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from rmb_build.core.records import Query
from rmb_build.stages.flow import Flow, batched
from rmb_build.stages.gather import read_queries, write_queries
from rmb_build.stages.spec import StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the run is the pipeline's, a layer above
    from rmb_build.pipeline.context import BuildRun

EMBED_BATCH = 512  # texts per embedding task on a Dask cluster


def embed_batch(env: StageEnv, texts: Sequence[str]) -> StageResult[None]:
    """``texts`` into the store: what it made is there (its figures are the run's ``embeddings``)."""
    assert env.store is not None  # an encoder stage's batch gets its store (pipeline/executor.py)
    env.store.add(texts)  # fills the store; reading every row back would cost a copy of them all
    return StageResult(None)


SPEC = StageSpec("embed", embed_batch, encoder=True, keyed_inputs=False, cached=False, counts="texts", listed=False)


def embedded_first(run: BuildRun, spec: StageSpec, flow: Flow, spill: Path, written: bool = False) -> list[Query]:
    """The flow's pool, read back from ``spill`` (written here unless ``written``) once ``spec``'s texts
    (``spec.embeds``) are in the build's store: the queries wait on disk while the encoder runs (its pass
    is the build's peak of memory)."""
    assert spec.embeds is not None, spec.name
    queries = flow.take_queries()
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
        run.record(SPEC, [run.call(SPEC, distinct)])
        return
    futures = [run.submit(SPEC, b) for b in batched(distinct, EMBED_BATCH)]
    run.record(SPEC, [f.result() for f in futures])
