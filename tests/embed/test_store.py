"""The embedding store: each distinct text encoded once, across calls, objects and processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import zlib

import numpy as np
import pytest

from rmb_build.embed.store import KEY_BYTES, EmbeddingStore


class CountingEncoder:
    """A deterministic encoder (vectors from the text's hash) that records every text it is given."""

    def __init__(self, dim: int = 8):
        self.dim = dim
        self.seen: list[str] = []

    def __call__(self, texts):
        self.seen.extend(texts)
        rows = []
        for t in texts:
            rng = np.random.default_rng(zlib.crc32(t.encode()))
            v = rng.normal(size=self.dim)
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32)


def test_each_distinct_text_is_encoded_once_across_calls_and_reopens(tmp_path):
    enc = CountingEncoder()
    store = EmbeddingStore(tmp_path, "counting@1", enc)
    first = store.embed(["a", "b", "a", "c"])
    assert sorted(enc.seen) == ["a", "b", "c"]
    np.testing.assert_array_equal(first[0], first[2])
    again = store.embed(["c", "b", "d"])
    assert sorted(enc.seen) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(again[0], first[3])
    # a new object on the same folder (a resumed build) encodes nothing it already has
    enc2 = CountingEncoder()
    reopened = EmbeddingStore(tmp_path, "counting@1", enc2)
    out = reopened.embed(["d", "a"])
    assert enc2.seen == []
    np.testing.assert_array_equal(out[1], first[0])
    assert len(reopened) == 4 and reopened.stats.requested == 2 and reopened.stats.encoded == 0


def test_add_fills_the_store_without_reading_rows_back(tmp_path, monkeypatch):
    enc = CountingEncoder()
    store = EmbeddingStore(tmp_path, "counting@1", enc)
    store.embed(["a"])

    def no_reads():
        raise AssertionError("add read the stored rows")

    monkeypatch.setattr(store, "_rows", no_reads)
    digests = store.add(["a", "b", "b", "c"])
    assert enc.seen == ["a", "b", "c"]  # "a" once, by the first embed
    assert len(digests) == 4 and digests[1] == digests[2] and len(set(digests)) == 3
    assert store.stats.requested == 5 and store.stats.encoded == 3 and store.stats.distinct == 3
    monkeypatch.undo()
    np.testing.assert_allclose(store.embed(["c"])[0], enc(["c"])[0])


def test_another_encoder_fingerprint_gets_its_own_vectors(tmp_path):
    EmbeddingStore(tmp_path, "counting@1", CountingEncoder()).embed(["x"])
    other = CountingEncoder(dim=4)
    vec = EmbeddingStore(tmp_path, "counting@2", other).embed(["x"])
    assert other.seen == ["x"] and vec.shape == (1, 4)


def test_float16_rows_come_back_close_to_float32(tmp_path):
    enc = CountingEncoder(dim=32)
    exact = enc(["p", "q"])
    got = EmbeddingStore(tmp_path, "counting@1", enc, dtype="float16").embed(["p", "q"])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, exact, atol=2e-3)


def test_a_torn_tail_from_a_killed_writer_is_cut_and_the_text_encoded_again(tmp_path):
    enc = CountingEncoder()
    store = EmbeddingStore(tmp_path, "counting@1", enc)
    store.embed(["a", "b"])
    # a kill after a row's vectors were written but before its key: vectors without a key
    with open(store.folder / "vectors.bin", "ab") as fh:
        fh.write(np.ones(enc.dim, dtype=np.float32).tobytes())
    # and half a key
    with open(store.folder / "keys.bin", "ab") as fh:
        fh.write(b"\x01" * (KEY_BYTES // 2))
    enc2 = CountingEncoder()
    fresh = EmbeddingStore(tmp_path, "counting@1", enc2)
    assert len(fresh) == 2
    out = fresh.embed(["c", "a"])
    assert enc2.seen == ["c"]
    np.testing.assert_allclose(out[0], enc(["c"])[0])
    assert os.path.getsize(fresh.folder / "keys.bin") == 3 * KEY_BYTES


def _worker(folder: str, texts: list[str], queue) -> None:
    enc = CountingEncoder()
    store = EmbeddingStore(folder, "counting@1", enc)
    store.embed(texts)
    queue.put(len(enc.seen))


def test_two_processes_share_one_store_without_duplicate_rows(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    texts = [f"t{i}" for i in range(300)]
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), texts, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    encoded = [queue.get(timeout=5) for _ in procs]
    assert all(n <= 300 for n in encoded)
    store = EmbeddingStore(tmp_path, "counting@1", CountingEncoder())
    # both may have encoded a text, but the store keeps one row per text
    assert len(store) == 300
    assert os.path.getsize(store.folder / "keys.bin") == 300 * KEY_BYTES


def test_float16_and_float32_rows_are_kept_apart(tmp_path):
    full = EmbeddingStore(tmp_path, "counting@1", CountingEncoder())
    full.embed(["a"])
    enc = CountingEncoder()
    half = EmbeddingStore(tmp_path, "counting@1", enc, dtype="float16")
    half.embed(["a"])
    assert enc.seen == ["a"] and half.folder != full.folder  # a config's new dtype: its own rows
    assert EmbeddingStore(tmp_path, "counting@1", CountingEncoder(), dtype=None).dtype == np.float32
    only_half = tmp_path / "half"
    EmbeddingStore(only_half, "counting@1", CountingEncoder(), dtype="float16").embed(["b"])
    reopened = EmbeddingStore(only_half, "counting@1", CountingEncoder(), dtype=None)  # what the folder holds
    assert reopened.dtype == np.float16 and "b" in reopened


def test_a_store_whose_meta_names_another_dtype_is_refused(tmp_path):
    store = EmbeddingStore(tmp_path, "counting@1", CountingEncoder())
    store.embed(["a"])
    meta = store.folder / "meta.json"
    meta.write_text(meta.read_text().replace("float32", "float16"))
    with pytest.raises(ValueError, match="float16"):
        EmbeddingStore(tmp_path, "counting@1", CountingEncoder())


@pytest.mark.torch
def test_real_minilm_vectors_from_the_store_equal_direct_encoding(tmp_path):
    from rmb_build.embed.encoder import embed, model_fingerprint

    texts = ["How do I bake bread?", "Write a haiku about autumn.", "How do I bake bread?"]
    store = EmbeddingStore(tmp_path, model_fingerprint(), lambda ts: embed(ts))
    got = store.embed(texts)
    np.testing.assert_allclose(got, embed(texts), atol=1e-5)
    assert store.stats.encoded == 2
