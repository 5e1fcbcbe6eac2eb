"""``rmb contamination RELEASE TRAIN_FILE``: release items whose prompt is (nearly) a training prompt."""

from __future__ import annotations

import argparse

from rmb_build.commands._embedding_option import add_embedding_options, embedding_store, report_store


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "release",
        help="an RMB release: its folder, its Hugging Face form (a folder or Hub id), or rmb (the official release)",
    )
    p.add_argument(
        "train",
        metavar="TRAIN_FILE",
        help="training prompts: .jsonl, .json, .parquet (file or folder), an RMB release, "
        "or a Hugging Face dataset (local folder or Hub name)",
    )
    p.add_argument(
        "--threshold", type=float, default=0.9, help="cosine at or above which a prompt counts (default 0.9)"
    )
    p.add_argument("--json", metavar="OUT", default=None, help="write every match here")
    p.add_argument(
        "--field",
        default=None,
        help="the training records' prompt (or conversation) field, "
        "if not one of prompt/instruction/question/messages/...",
    )
    p.add_argument(
        "--kind",
        choices=("jsonl", "json", "parquet", "hf", "rmb_release", "sharegpt"),
        default=None,
        help="how to read TRAIN_FILE (default: from its name)",
    )
    p.add_argument("--split", default="train", help="hf: the split (default train)")
    p.add_argument("--name", default=None, help="hf: the configuration name")
    add_embedding_options(p)


def _kind(path: str) -> str:
    from pathlib import Path

    from rmb_build.release.read import find_rmb_root

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".json", ".parquet"):
        return suffix[1:]
    if p.is_dir() and find_rmb_root(p) is not None:
        return "rmb_release"
    if p.is_dir() and any(p.glob("*.parquet")) and not any(p.glob("*.json")):
        return "parquet"
    return "hf"


def run(args: argparse.Namespace) -> int:
    from rmb_build.analysis.contamination import find_contamination
    from rmb_build.benchmarks.formats import RMB, open_release
    from rmb_build.core import atomic
    from rmb_build.core.errors import RMBError
    from rmb_build.stages.gather import gather
    from rmb_build.stages.options import source_config

    if not 0 < args.threshold <= 1:
        raise RMBError("--threshold must be in (0, 1]")
    release = open_release(args.release, RMB)
    kind = args.kind or _kind(args.train)
    fields = {}
    if args.field:
        fields = {"conversation": args.field} if kind == "sharegpt" else {"prompt": args.field}
    hub = {"split": args.split, "name": args.name, "streaming": False} if kind == "hf" else {}
    src = source_config(kind=kind, path=args.train, fields=fields, **hub)
    train = gather([src])
    stats = next(iter(train.stats.values()))
    if not train.queries:
        raise RMBError(
            f"{args.train}: no usable prompts (read {stats['read']}, reasons: {stats['reasons']}); "
            "name the prompt field with --field"
        )
    store = embedding_store(args)
    hits = find_contamination(release, train.queries, threshold=args.threshold, show_progress=True, embed=store)
    report_store(store)
    items = sum(1 for _ in release.items())
    print(
        f"{len(hits)} of {items} release items have a training prompt at cosine >= {args.threshold} "
        f"({len(train.queries)} training prompts from {stats['read']} records)"
    )
    for h in hits[:20]:
        print(
            f"  {h.similarity:.3f} {h.kind:<5} {h.set}:{h.uid} {h.scenario}  <- train {h.train_id}: "
            f"{' '.join(h.prompt.split())[:70]!r}"
        )
    if len(hits) > 20:
        print(f"  ... {len(hits) - 20} more" + ("" if args.json else " (use --json OUT for all)"))
    if args.json:
        atomic.write_json(
            args.json,
            {
                "schema_version": 1,
                "release": release.name,
                "train": args.train,
                "threshold": args.threshold,
                "release_items": items,
                "train_prompts": len(train.queries),
                "train_stats": stats,
                "contaminated_items": len(hits),
                "items": [h.to_json() for h in hits],
            },
        )
        print(f"written to {args.json}")
    return 0
