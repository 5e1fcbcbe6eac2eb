"""The ``embed`` stage: texts into the build's embedding store before the stages that read them
(``dedup``, ``classify``), so that concurrent batches, or a Dask cluster's workers, find every vector
there. Uncached: the store is its cache."""

from __future__ import annotations

from typing import Any, Sequence

from rmb_build.stages.spec import StageEnv, StageSpec


def embed_batch(env: StageEnv, texts: Sequence[str]) -> dict[str, Any]:
    assert env.store is not None  # an encoder stage's batch gets its store (pipeline/executor.py)
    env.store.add(texts)  # fills the store; reading every row back would cost a copy of them all
    return {"texts": len(texts)}


SPEC = StageSpec("embed", embed_batch, encoder=True, keyed_inputs=False, cached=False, counts="texts", listed=False)
