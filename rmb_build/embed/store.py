"""A build's embeddings on disk: each distinct text is embedded once per encoder, whichever stage asks.

Dedup, classification, the audit's near-duplicate check and ``rmb contamination`` embed largely the
same texts; an :class:`EmbeddingStore` in the run folder makes every later request for a text a
lookup, in this process or the next (a resumed or re-run build embeds nothing it already has).

Layout, one folder per encoder fingerprint and dtype (``<store>/<slug>/``, float16 rows in ``<slug>-float16/``):
- ``vectors.bin``: rows of ``dim`` values (float16 or float32), appended, read memory-mapped;
- ``keys.bin``: the sha256 digest (32 bytes) of each row's text, appended after the row is written,
  so a row counts only once its key is there (a process killed mid-write leaves a tail that the
  next open cuts off);
- ``meta.json``: encoder fingerprint, dimension, dtype.
Writers hold an exclusive ``fcntl`` lock on ``lock``, so several processes (Dask workers, two builds
on one run folder) can share a store.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from rmb_build.core import atomic

KEY_BYTES = 32
# Texts encoded and appended per step: bounds the memory of one step and what a kill can lose.
CHUNK_TEXTS = 4096

Encode = Callable[[Sequence[str]], np.ndarray]


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass
class StoreStats:
    """What a store was asked for and what it had to encode (over this object's lifetime)."""

    requested: int = 0  # texts asked for, repeats included
    encoded: int = 0  # texts this object sent to the encoder
    encode_seconds: float = 0.0
    asked: set[bytes] = field(default_factory=set, repr=False)  # digests of the texts asked for

    @property
    def distinct(self) -> int:
        """Distinct texts asked for."""
        return len(self.asked)

    def to_json(self) -> dict[str, float | int]:
        return {
            "requested": self.requested,
            "distinct": self.distinct,
            "encoded": self.encoded,
            "encode_seconds": round(self.encode_seconds, 3),
        }


class EmbeddingStore:
    """Embeddings of texts under one encoder, persisted in ``folder`` and computed only when missing.

    ``encode`` maps texts to unit-length rows (``rmb_build.embed.encoder.embed`` with a fixed model by
    default); ``fingerprint`` names the encoder and must change whenever its vectors would. ``dtype``
    None: the dtype the folder already holds, float32 for a new one. One object per thread (its
    stats and index are not locked; processes and objects share the folder safely).
    """

    def __init__(self, folder: str | os.PathLike, fingerprint: str, encode: Encode, *, dtype: str | None = "float32"):
        if dtype not in ("float16", "float32", None):
            raise ValueError(f"dtype must be float16 or float32, not {dtype!r}")
        self.fingerprint = fingerprint
        self.encode = encode
        slug = (
            re.sub(r"[^A-Za-z0-9._-]+", "_", fingerprint)[:80]
            + "-"
            + hashlib.sha256(fingerprint.encode()).hexdigest()[:10]
        )

        def place(kind: str) -> Path:  # float16 rows live beside float32 ones, never mixed
            return Path(folder) / (slug if kind == "float32" else f"{slug}-{kind}")

        if dtype is None:
            dtype = next((k for k in ("float32", "float16") if (place(k) / "meta.json").is_file()), "float32")
        self.folder = place(dtype)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stats = StoreStats()
        self._index: dict[bytes, int] = {}
        self._keys_read = 0  # bytes of keys.bin already in _index
        self.dim: int | None = None
        meta = self.folder / "meta.json"
        self.dtype = np.dtype(dtype)
        if meta.is_file():
            info = json.loads(meta.read_text(encoding="utf-8"))
            if info.get("fingerprint") != fingerprint or info.get("dtype") != self.dtype.name:
                raise ValueError(
                    f"{meta}: store made for {info.get('fingerprint')!r} ({info.get('dtype')}), "
                    f"not {fingerprint!r} ({self.dtype.name})"
                )
            self.dim = int(info["dim"])

    # -- reading ---------------------------------------------------------------------------------
    @property
    def _keys_path(self) -> Path:
        return self.folder / "keys.bin"

    @property
    def _vectors_path(self) -> Path:
        return self.folder / "vectors.bin"

    def _refresh(self) -> None:
        """Take in rows other processes appended since the last look."""
        if not self._keys_path.is_file():
            return
        size = self._keys_path.stat().st_size // KEY_BYTES * KEY_BYTES
        if size > self._keys_read:
            with open(self._keys_path, "rb") as fh:
                fh.seek(self._keys_read)
                data = fh.read(size - self._keys_read)
            start = self._keys_read // KEY_BYTES
            for i in range(len(data) // KEY_BYTES):
                self._index.setdefault(data[i * KEY_BYTES : (i + 1) * KEY_BYTES], start + i)
            self._keys_read = size

    def _rows(self) -> np.ndarray:
        """The stored rows, memory-mapped anew: not kept, so that the pages a call reads stop counting
        in this process's resident memory once its copy of them is made."""
        n = self._keys_read // KEY_BYTES
        if n == 0 or self.dim is None:
            return np.zeros((0, self.dim or 0), dtype=self.dtype)
        return np.memmap(self._vectors_path, dtype=self.dtype, mode="r", shape=(n, self.dim))

    def __len__(self) -> int:
        self._refresh()
        return len(self._index)

    def __contains__(self, text: str) -> bool:
        self._refresh()
        return text_digest(text) in self._index

    # -- writing ---------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.folder / "lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _cut_torn_tail(self) -> None:
        """After a kill between a row's vectors and its key: drop vectors (and key bytes) with no pair."""
        if self.dim is None:
            return
        row_bytes = self.dim * self.dtype.itemsize
        keys = self._keys_path.stat().st_size // KEY_BYTES if self._keys_path.is_file() else 0
        vecs = self._vectors_path.stat().st_size // row_bytes if self._vectors_path.is_file() else 0
        rows = min(keys, vecs)
        for path, size in ((self._keys_path, rows * KEY_BYTES), (self._vectors_path, rows * row_bytes)):
            if path.is_file() and path.stat().st_size != size:
                os.truncate(path, size)

    def _append(self, digests: Sequence[bytes], vectors: np.ndarray) -> None:
        with self._locked():
            if self.dim is None:
                self.dim = int(vectors.shape[1])
                atomic.write_text(
                    self.folder / "meta.json",
                    json.dumps({"fingerprint": self.fingerprint, "dim": self.dim, "dtype": self.dtype.name}, indent=1),
                )
            self._cut_torn_tail()
            self._refresh()
            fresh = [i for i, d in enumerate(digests) if d not in self._index]
            if not fresh:
                return
            rows = np.ascontiguousarray(vectors[fresh], dtype=self.dtype)
            with open(self._vectors_path, "ab") as fh:
                fh.write(rows.tobytes())
                fh.flush()
                os.fsync(fh.fileno())
            with open(self._keys_path, "ab") as fh:
                fh.write(b"".join(digests[i] for i in fresh))
                fh.flush()
                os.fsync(fh.fileno())
            self._refresh()

    # -- the public operations -------------------------------------------------------------------
    def add(self, texts: Sequence[str]) -> list[bytes]:
        """Encode and persist the texts the store has never seen; the digests of ``texts``, in order.

        Reads no stored row: what a stage that only fills the store (the flow's ``embed`` task)
        should call, so its memory does not grow with the store."""
        import time

        self.stats.requested += len(texts)
        digests = [text_digest(t) for t in texts]
        self.stats.asked.update(digests)
        self._refresh()
        missing: dict[bytes, str] = {}
        for d, t in zip(digests, texts):
            if d not in self._index and d not in missing:
                missing[d] = t
        todo = list(missing.items())
        del missing
        for start in range(0, len(todo), CHUNK_TEXTS):
            chunk = todo[start : start + CHUNK_TEXTS]
            t0 = time.perf_counter()
            vectors = np.asarray(self.encode([t for _, t in chunk]), dtype=np.float32)
            self.stats.encode_seconds += time.perf_counter() - t0
            self.stats.encoded += len(chunk)
            self._append([d for d, _ in chunk], vectors)
        return digests

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order; only texts the store has never seen are encoded."""
        digests = self.add(texts)
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        rows = self._rows()
        return np.asarray(rows[[self._index[d] for d in digests]], dtype=np.float32)

    __call__ = embed
