"""dedup: the blocked exact cosine search against brute force, the greedy resolution, and the stage
on real all-MiniLM-L6-v2 embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from rmb_build.core.items import Turn
from rmb_build.core.records import Query, query_id
from rmb_build.embed.similarity import best_match, normalize, similar_pairs
from rmb_build.stages.dedup import dedup, normalized_text, resolve_near
from rmb_build.stages.options import DedupConfig


def _q(n: int, *user_turns: str) -> Query:
    turns: list[Turn] = []
    for k, text in enumerate(user_turns):
        if k:
            turns.append(Turn("assistant", f"reply {k}"))
        turns.append(Turn("user", text))
    return Query(query_id("t", str(n)), tuple(turns), "t", str(n))


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors in a few tight clusters, so that many pairs pass a high threshold."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((7, dim))
    return normalize(centres[rng.integers(0, 7, n)] + 0.35 * rng.standard_normal((n, dim)))


@pytest.mark.parametrize("block", [64, 97, 1000])
def test_similar_pairs_equals_brute_force(block):
    x = _clustered(700, 24, 0)
    full = x @ x.T
    for thr in (0.8, 0.95):
        i, j, s = similar_pairs(x, threshold=thr, block_size=block)
        ei, ej = np.nonzero(np.triu(full >= np.float32(thr), 1))
        assert len(i) > 0 and np.array_equal(i, ei) and np.array_equal(j, ej)
        assert np.allclose(s, full[ei, ej], atol=1e-6)
    y = _clustered(150, 24, 1)
    i, j, s = similar_pairs(y, x, threshold=0.8, block_size=block)
    ei, ej = np.nonzero(y @ x.T >= np.float32(0.8))
    assert np.array_equal(i, ei) and np.array_equal(j, ej)
    bj, bs = best_match(y, x, block_size=block)
    assert np.array_equal(bj, (y @ x.T).argmax(axis=1)) and np.allclose(bs, (y @ x.T).max(axis=1))


def test_similarity_edge_cases():
    empty = np.zeros((0, 8), dtype=np.float32)
    assert all(len(a) == 0 for a in similar_pairs(empty))
    x = normalize(np.eye(3, 8))
    assert len(similar_pairs(x, threshold=0.5)[0]) == 0  # a row never pairs with itself
    assert np.array_equal(normalize(np.zeros((1, 4)))[0], np.zeros(4))
    j, s = best_match(x, empty)
    assert len(j) == 3 and np.all(np.isneginf(s))


def test_greedy_resolution_keeps_the_first_and_never_chains():
    # 0~1 and 1~2 but not 0~2: 1 goes (a duplicate of 0); 2 stays, its only partner is gone.
    keep, partner, best = resolve_near(3, np.array([0, 1]), np.array([1, 2]), np.array([0.95, 0.97], np.float32))
    assert keep.tolist() == [True, False, True] and partner[1] == 0 and best[1] == np.float32(0.95)
    # 3 has two kept partners: it records the more similar one
    keep, partner, best = resolve_near(4, np.array([0, 2]), np.array([3, 3]), np.array([0.91, 0.99], np.float32))
    assert keep.tolist() == [True, True, True, False] and partner[3] == 2
    # protected rows (already in the benchmark) are never removed
    keep, _, _ = resolve_near(2, np.array([0]), np.array([1]), np.array([0.99], np.float32), protected=2)
    assert keep.all()


def test_exact_key_ignores_case_space_and_width_but_not_words():
    a = _q(0, "How  do I\nreverse a list?")
    b = _q(1, "how do i reverse a list?")
    c = _q(2, "how do i reverse a string?")
    assert normalized_text(a.conversation) == normalized_text(b.conversation) != normalized_text(c.conversation)
    assert normalized_text(_q(3, "ＡＢＣ").conversation) == normalized_text(_q(4, "abc").conversation)
    # every user turn counts: the same last question after other turns is another query
    assert normalized_text(_q(5, "Hi", "abc").conversation) != normalized_text(_q(6, "abc").conversation)


def test_dedup_with_given_embeddings_keeps_provenance():
    queries = [_q(n, text) for n, text in enumerate(["alpha", "ALPHA ", "beta", "gamma", "delta"])]
    vecs = normalize(np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0.02, 1, 0], [0, 0, 1]], dtype=np.float32))
    res = dedup(queries, DedupConfig(threshold=0.95), embeddings=vecs)
    assert [q.source_id for q in res.kept] == ["0", "2", "4"]
    removed = {d.removed_id: d for d in res.removed}
    assert removed[queries[1].id].kind == "exact" and removed[queries[1].id].kept_id == queries[0].id
    near = removed[queries[3].id]
    assert near.kind == "near" and near.kept_id == queries[2].id and 0.95 <= near.similarity < 1
    assert res.stats == {"kept": 3, "exact": 1, "near": 1}
    with pytest.raises(ValueError, match="2 embeddings for 5 queries"):
        dedup(queries, embeddings=vecs[:2])


@pytest.mark.torch
def test_dedup_on_real_embeddings_and_against_existing_queries():
    queries = [
        _q(0, "How do I reverse a list in Python?"),
        _q(1, "how do I reverse a list in python?"),  # exact (case)
        _q(2, "How can I reverse a Python list?"),  # near
        _q(3, "Write a poem about the sea."),
        _q(4, "What is the capital of France?"),
        _q(5, "Explain how photosynthesis works."),
    ]
    res = dedup(queries, DedupConfig(threshold=0.9))
    assert [q.source_id for q in res.kept] == ["0", "3", "4", "5"]
    kinds = {d.removed_id: (d.kind, d.kept_id) for d in res.removed}
    assert kinds == {queries[1].id: ("exact", queries[0].id), queries[2].id: ("near", queries[0].id)}

    existing = [_q(100, "Tell me the capital city of France."), _q(101, "Explain how photosynthesis works.")]
    res = dedup(queries[3:6], DedupConfig(threshold=0.9), existing=existing)
    assert [q.source_id for q in res.kept] == ["3"]
    assert {d.removed_id: d.kept_id for d in res.removed} == {
        queries[4].id: existing[0].id,
        queries[5].id: existing[1].id,
    }
