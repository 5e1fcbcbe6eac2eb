"""Not a subcommand: ``--embeddings DIR``, shared by ``rmb audit`` and ``rmb contamination``: reuse the
vectors of an embedding store (e.g. a build's ``runs/<name>/embeddings``) and add the new ones to it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmb_build.embed.store import EmbeddingStore


def add_embedding_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embeddings",
        metavar="DIR",
        default=None,
        help="an embedding store folder (e.g. a build's runs/<name>/embeddings): texts it holds "
        "are not encoded again, new ones are added",
    )
    parser.add_argument(
        "--embedding-backend",
        default="torch",
        metavar="BACKEND",
        help="the encoder's backend, as the build's embeddings.backend: torch (default), onnx or onnx-int8",
    )


def embedding_store(args: argparse.Namespace) -> EmbeddingStore | None:
    """The store ``--embeddings`` names (all-MiniLM-L6-v2 with ``--embedding-backend``), or None."""
    if not args.embeddings:
        return None
    from rmb_build.core.errors import RMBError
    from rmb_build.embed.encoder import BACKENDS, store_for

    if args.embedding_backend not in BACKENDS:
        raise RMBError(f"--embedding-backend {args.embedding_backend}: one of {', '.join(BACKENDS)}")
    try:
        return store_for(args.embeddings, backend=args.embedding_backend, dtype=None)
    except (OSError, ValueError) as exc:
        raise RMBError(f"--embeddings {args.embeddings}: {exc}") from None


def report_store(store: EmbeddingStore | None) -> None:
    """One line: what the store was asked for and what it had to encode."""
    if store is not None:
        s = store.stats
        print(
            f"embeddings: {s.distinct} distinct texts, {s.encoded} encoded ({s.encode_seconds:.1f} s), "
            f"the rest from {store.folder}"
        )
