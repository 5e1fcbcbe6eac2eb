"""Exact cosine near-duplicate search over unit vectors, blocked so memory stays bounded.

Every pair above the threshold is found (no approximate index): the work is the n^2/2 dot
products, done as float32 matrix products tile by tile, so peak memory is a few tiles, not n^2.
"""

from __future__ import annotations

import numpy as np


def normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def similar_pairs(a: np.ndarray, b: np.ndarray | None = None, threshold: float = 0.9,
                  block_size: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (i, j, cosine) with cosine >= threshold.

    With ``b`` None, pairs within ``a`` with i < j; otherwise i indexes ``a`` and j indexes ``b``.
    Rows must already be unit vectors (see ``normalize``). Returns three arrays sorted by (i, j).
    """
    a = np.ascontiguousarray(a, dtype=np.float32)
    self_join = b is None
    b = a if self_join else np.ascontiguousarray(b, dtype=np.float32)
    n_a, n_b = len(a), len(b)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    sims: list[np.ndarray] = []
    thr = np.float32(threshold)
    tile = None
    for r0 in range(0, n_a, block_size):
        r1 = min(r0 + block_size, n_a)
        c_start = r0 if self_join else 0
        for c0 in range(c_start, n_b, block_size):
            c1 = min(c0 + block_size, n_b)
            shape = (r1 - r0, c1 - c0)
            if tile is None or tile.shape != shape:
                tile = np.empty(shape, dtype=np.float32)
            np.matmul(a[r0:r1], b[c0:c1].T, out=tile)
            if self_join and c0 == r0:
                # the diagonal tile: keep only the strict upper triangle (i < j)
                tile[np.tril_indices(shape[0], 0, shape[1])] = -np.inf
            ii, jj = np.nonzero(tile >= thr)
            if len(ii):
                rows.append(ii + r0)
                cols.append(jj + c0)
                sims.append(tile[ii, jj].copy())
    if not rows:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty.copy(), np.empty(0, dtype=np.float32)
    i = np.concatenate(rows).astype(np.int64)
    j = np.concatenate(cols).astype(np.int64)
    s = np.concatenate(sims)
    order = np.lexsort((j, i))
    return i[order], j[order], s[order]


def best_match(a: np.ndarray, b: np.ndarray, block_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``a``, the index of its most similar row of ``b`` and that cosine."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    best_j = np.zeros(len(a), dtype=np.int64)
    best_s = np.full(len(a), -np.inf, dtype=np.float32)
    for r0 in range(0, len(a), block_size):
        r1 = min(r0 + block_size, len(a))
        for c0 in range(0, len(b), block_size):
            c1 = min(c0 + block_size, len(b))
            tile = a[r0:r1] @ b[c0:c1].T
            j = tile.argmax(axis=1)
            s = tile[np.arange(len(j)), j]
            better = s > best_s[r0:r1]
            best_s[r0:r1][better] = s[better]
            best_j[r0:r1][better] = j[better] + c0
    return best_j, best_s
