"""Which release prompts also appear in a training set: exact (normalised text) or near-duplicate
(cosine of sentence embeddings >= threshold, searched block by block like dedup)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from rmb_build.core.items import conversation_key
from rmb_build.core.records import Query
from rmb_build.core.text import search_text
from rmb_build.embed.encoder import DEFAULT_MODEL, Embed
from rmb_build.embed.similarity import BLOCK_SIZE, best_match
from rmb_build.stages.dedup import embed_queries, normalized_text
from rmb_build.stages.sources.records import release_queries

if TYPE_CHECKING:
    from rmb_build.release.read import Release


@dataclass(frozen=True, slots=True)
class Hit:
    set: str
    uid: str
    scenario: str
    similarity: float
    kind: str  # "exact" or "near"
    train_id: str  # the training record's own id (``Query.source_id``)
    prompt: str
    train_prompt: str

    def to_json(self, excerpt: int = 300) -> dict[str, Any]:
        return {
            "set": self.set,
            "uid": self.uid,
            "scenario": self.scenario,
            "similarity": round(self.similarity, 4),
            "kind": self.kind,
            "train_id": self.train_id,
            "prompt": self.prompt[:excerpt],
            "train_prompt": self.train_prompt[:excerpt],
        }


def find_contamination(
    release: Release,
    train: Sequence[Query],
    threshold: float = 0.9,
    model: str = DEFAULT_MODEL,
    block_size: int = BLOCK_SIZE,
    show_progress: bool = False,
    embed: Embed | None = None,
) -> list[Hit]:
    """Every release item whose conversation's user turns match a training query's, most similar first.

    Each distinct conversation is compared once; all items that share it are listed. ``embed``: what
    embeds the texts (an embedding store reuses a build's vectors); default the plain encoder of ``model``.
    """
    convs = release_queries(release)
    if not convs or not train:
        return []
    exact = {}
    for t in train:
        exact.setdefault(normalized_text(t.conversation), t)
    match: dict[str, tuple[float, str, Query]] = {}
    rest = []
    for q in convs:
        t = exact.get(normalized_text(q.conversation))
        if t is not None:
            match[conversation_key(q.conversation)] = (1.0, "exact", t)
        else:
            rest.append(q)
    if rest:
        j, s = best_match(
            embed_queries(rest, model, embed=embed), embed_queries(train, model, show_progress, embed), block_size
        )
        for q, jj, ss in zip(rest, j.tolist(), s.tolist()):
            if ss >= threshold:
                match[conversation_key(q.conversation)] = (min(float(ss), 1.0), "near", train[jj])
    hits = []
    for item in release.items():
        found = match.get(conversation_key(item.conversation))
        if found:
            sim, kind, t = found
            hits.append(
                Hit(
                    item.set_name,
                    item.uid,
                    item.scenario_id,
                    sim,
                    kind,
                    t.source_id,
                    search_text(item.conversation),
                    search_text(t.conversation),
                )
            )
    hits.sort(key=lambda h: (-h.similarity, h.set, h.scenario, h.uid))
    return hits


def held_out(
    queries: Sequence[Query],
    release: Release,
    threshold: float = 0.9,
    model: str = DEFAULT_MODEL,
    block_size: int = BLOCK_SIZE,
    embed: Embed | None = None,
) -> tuple[list[Query], list[dict[str, Any]]]:
    """``queries`` without those whose user turns match a conversation of ``release``: exactly (normalised
    text) or nearly (cosine of the same sentence embeddings >= ``threshold``). Returns (the kept queries,
    one record per dropped query: its id, the release item's ``set:uid``, the similarity and the kind)."""
    convs = release_queries(release)
    if not convs or not queries:
        return list(queries), []
    exact = {}
    for c in convs:
        exact.setdefault(normalized_text(c.conversation), c)
    found: dict[int, tuple[float, str, Query]] = {}
    rest = []
    for i, q in enumerate(queries):
        c = exact.get(normalized_text(q.conversation))
        if c is not None:
            found[i] = (1.0, "exact", c)
        else:
            rest.append(i)
    if rest:
        j, s = best_match(
            embed_queries([queries[i] for i in rest], model, embed=embed),
            embed_queries(convs, model, embed=embed),
            block_size,
        )
        for i, jj, ss in zip(rest, j.tolist(), s.tolist()):
            if ss >= threshold:
                found[i] = (min(float(ss), 1.0), "near", convs[jj])
    kept = [q for i, q in enumerate(queries) if i not in found]
    dropped = [
        {"query": queries[i].id, "release_item": c.source_id, "similarity": round(sim, 4), "kind": kind}
        for i, (sim, kind, c) in sorted(found.items())
    ]
    return kept, dropped
