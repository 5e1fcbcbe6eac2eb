"""Stage 2, dedup: exact duplicates (normalised text), then near-duplicates by the cosine of
sentence-transformers embeddings, found exactly and block by block (``rmb_build.embed.similarity``).

The first query (in input order) of a group is kept; every removed query records which kept query
it duplicated and how similar they are, so nothing disappears without a trace.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Sequence

import numpy as np

from rmb_build.core import paths as P
from rmb_build.core.items import Turn
from rmb_build.core.records import Query
from rmb_build.core.text import identity, search_text
from rmb_build.embed.encoder import DEFAULT_MODEL, Embed
from rmb_build.embed.similarity import BLOCK_SIZE, similar_pairs
from rmb_build.embed.store import text_digest
from rmb_build.stages.embed import embedded_first
from rmb_build.stages.options import DedupConfig
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the run is the pipeline's, a layer above
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Flow


@dataclass(frozen=True, slots=True)
class Duplicate:
    removed_id: str
    kept_id: str
    similarity: float
    kind: Literal["exact", "near"]

    def to_json(self) -> dict:
        return {
            "removed_id": self.removed_id,
            "kept_id": self.kept_id,
            "similarity": round(float(self.similarity), 6),
            "kind": self.kind,
        }


@dataclass
class DedupResult:
    kept: list[Query]
    removed: list[Duplicate]

    @property
    def stats(self) -> dict[str, int]:
        exact = sum(d.kind == "exact" for d in self.removed)
        return {"kept": len(self.kept), "exact": exact, "near": len(self.removed) - exact}


def normalized_text(conversation: Sequence[Turn]) -> str:
    """Exact-duplicate key: the ``text.identity`` of the query's ``text.search_text`` (its user turns)."""
    return identity(search_text(conversation))


def exact_duplicates(queries: Sequence[Query]) -> tuple[list[int], list[Duplicate]]:
    """Indexes of the first query of each normalised text, and a Duplicate for every other one."""
    first: dict[bytes, int] = {}  # keyed by digest: a copy of every normalised text would grow with the pool
    kept: list[int] = []
    removed: list[Duplicate] = []
    for n, q in enumerate(queries):
        key = text_digest(normalized_text(q.conversation))
        if key in first:
            removed.append(Duplicate(q.id, queries[first[key]].id, 1.0, "exact"))
        else:
            first[key] = n
            kept.append(n)
    return kept, removed


def resolve_near(
    n: int, i: np.ndarray, j: np.ndarray, sim: np.ndarray, protected: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy in input order: a row is removed when an earlier *kept* row is at least as similar as
    the threshold. Returns (keep mask, each removed row's kept partner, that similarity).

    Rows ``< protected`` are always kept (queries that already exist, e.g. a release being extended).
    ``i < j`` must hold for every pair; pairs need not be sorted.
    """
    keep = np.ones(n, dtype=bool)
    partner = np.full(n, -1, dtype=np.int64)
    best = np.zeros(n, dtype=np.float32)
    order = np.lexsort((-sim, j))  # by removed candidate, most similar partner first
    for i_, j_, s_ in zip(i[order].tolist(), j[order].tolist(), sim[order].tolist()):
        if j_ < protected or not keep[j_]:
            continue
        if keep[i_]:
            keep[j_] = False
            partner[j_], best[j_] = i_, s_
    return keep, partner, best


def near_duplicates(
    embeddings: np.ndarray, threshold: float, block_size: int = BLOCK_SIZE, protected: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``resolve_near`` over every pair of rows with cosine >= threshold (rows are unit vectors)."""
    i, j, s = similar_pairs(embeddings, threshold=threshold, block_size=block_size)
    return resolve_near(len(embeddings), i, j, s, protected)


def embed_queries(
    queries: Sequence[Query], model: str = DEFAULT_MODEL, show_progress: bool = False, embed: Embed | None = None
) -> np.ndarray:
    """Unit embeddings of each query's ``search_text`` (one row per query), by ``embed`` (e.g. the
    build's embedding store) or else the plain encoder of ``model``."""
    texts = [search_text(q.conversation) for q in queries]
    if embed is not None:
        return embed(texts)
    from rmb_build.embed.encoder import embed as encode  # torch loads only when embeddings are needed

    return encode(texts, name=model, show_progress=show_progress)


def dedup(
    queries: Sequence[Query],
    cfg: DedupConfig | None = None,
    *,
    embeddings: np.ndarray | None = None,
    existing: Sequence[Query] = (),
    show_progress: bool = False,
    embed: Embed | None = None,
) -> DedupResult:
    """Remove exact, then near duplicates (cosine >= ``cfg.threshold``) from ``queries``.

    ``embeddings``: precomputed unit rows for ``queries`` (same order), e.g. from a stage cache.
    ``existing``: queries already in the benchmark; they are never removed, and a new query that
    duplicates one of them is (extending a release without repeating its prompts).
    ``embed``: what embeds the search texts (the build's embedding store); default the plain
    encoder of ``cfg.model``.
    """
    cfg = cfg or DedupConfig()
    if embeddings is not None and len(embeddings) != len(queries):
        raise ValueError(f"{len(embeddings)} embeddings for {len(queries)} queries")
    everything = [*existing, *queries]
    kept_idx, removed = exact_duplicates(everything)
    n_old = len(existing)
    existing_ids = {q.id for q in existing}
    removed = [d for d in removed if d.removed_id not in existing_ids]
    kept_old = [k for k in kept_idx if k < n_old]
    kept_new = [k for k in kept_idx if k >= n_old]
    if not kept_new:
        return DedupResult([], removed)
    new_vecs = (
        embeddings[[k - n_old for k in kept_new]]
        if embeddings is not None
        else embed_queries([everything[k] for k in kept_new], cfg.model, show_progress, embed)
    )
    old_vecs = embed_queries([everything[k] for k in kept_old], cfg.model, embed=embed) if kept_old else new_vecs[:0]
    rows = kept_old + kept_new
    vecs = np.concatenate([old_vecs, new_vecs]) if kept_old else new_vecs  # no second copy of them all
    del old_vecs, new_vecs
    keep, partner, best = near_duplicates(vecs, cfg.threshold, cfg.block_size, protected=len(kept_old))
    kept: list[Query] = []
    for r, k in enumerate(rows):
        if k < n_old:
            continue
        if keep[r]:
            kept.append(everything[k])
        else:
            removed.append(Duplicate(everything[k].id, everything[rows[partner[r]]].id, float(best[r]), "near"))
    return DedupResult(kept, removed)


def dedup_batch(env: StageEnv, queries: Sequence[Query]) -> StageResult[DedupResult]:
    deduped = dedup(queries, env.section, embed=env.store)
    return StageResult(deduped, stats=deduped.stats)


def embedded_texts(cfg: DedupConfig, queries: Sequence[Query]) -> list[str]:
    """The texts dedup's batches look up in the build's store: each query's search text."""
    return [search_text(q.conversation) for q in queries]


async def dedup_pool(run: BuildRun, flow: Flow) -> None:
    """The flow's pool less its duplicates (its search texts embedded first, the queries waiting in the raw
    file gather wrote); what each kind of duplicate removed goes to the run's accounting."""
    queries = embedded_first(run, SPEC, flow, run.paths.raw / P.RAW_QUERIES, written=True)
    deduped = run.record(SPEC, [run.submit(SPEC, queries).result()])[0].records
    run.acc.dedup_removed = dict(Counter(str(r.kind) for r in deduped.removed))
    flow.queries = deduped.kept


SPEC = StageSpec(
    "dedup",
    dedup_batch,
    config="dedup",
    encoder=True,
    optional=True,
    embeds=embedded_texts,
    at=Position.POOL,
    on_run=dedup_pool,
)
