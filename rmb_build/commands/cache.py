"""``rmb cache stats|prune``: inspect and prune the LLM response cache of a build (or any cache folder)."""

from __future__ import annotations

import argparse
import json


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, help_text in (
        ("stats", "rows, size, per endpoint/model/stage, oldest and newest entry"),
        ("prune", "delete cached responses by age, endpoint, model or stage"),
    ):
        a = sub.add_parser(action, help=help_text, description=help_text)
        where = a.add_mutually_exclusive_group()
        where.add_argument("--cache", metavar="PATH", help="a cache folder or its responses.sqlite file")
        where.add_argument("--name", help="build name: use runs/NAME/llm_cache under the workdir")
        where.add_argument(
            "--config",
            help="build config: use runs/<its name>/llm_cache under the workdir (default: the embedded demo build's)",
        )
        a.add_argument("--workdir", default=None, help="folder holding runs/ (default: $RMB_WORKDIR or .)")
        if action == "stats":
            a.add_argument("--json", action="store_true", help="print the statistics as one JSON object")
        else:
            a.add_argument("--older-than", type=float, metavar="DAYS", help="entries created more than DAYS days ago")
            a.add_argument("--endpoint", help="entries of this endpoint (config name, base URL or embedded:<model>)")
            a.add_argument("--model", help="entries of this model")
            a.add_argument("--stage", help="entries of this stage")
            a.add_argument("--all", action="store_true", help="allow pruning with no filter (empties the cache)")


def _cache_path(args: argparse.Namespace):
    """--cache as given, else runs/<name>/llm_cache of --name, of --config's name, or of the demo build."""
    from rmb_build.commands.build import load_build_config
    from rmb_build.core.paths import run_dir

    if args.cache:
        return args.cache
    name = args.name or load_build_config(args.config)[0].name
    return run_dir(name, args.workdir) / "llm_cache"


def _print_stats(stats: dict) -> None:
    print(f"cache: {stats['path']}")
    print(
        f"  {stats['rows']} responses, {stats['size_bytes'] / 1e6:.2f} MB; oldest {stats['oldest']}, newest {stats['newest']}"
    )
    for title, key in (("endpoint", "by_endpoint"), ("model", "by_model"), ("stage", "by_stage")):
        if stats[key]:
            print(f"  by {title}:")
            for value, n in stats[key].items():
                print(f"    {value or '(none)':<40} {n:>8}")


def run(args: argparse.Namespace) -> int:
    from rmb_build.core.errors import InputError
    from rmb_build.llm.cache import ResponseCache

    path = _cache_path(args)
    try:
        cache = ResponseCache(path, create=False)
    except FileNotFoundError as exc:
        raise InputError(str(exc), "no LLM cache here (nothing was cached yet, or a wrong --cache/--name)") from None
    with cache:
        if args.action == "stats":
            stats = cache.stats()
            print(json.dumps(stats, ensure_ascii=False)) if args.json else _print_stats(stats)
            return 0
        filters = {
            "older_than_days": args.older_than,
            "endpoint": args.endpoint,
            "model": args.model,
            "stage": args.stage,
        }
        if all(v is None for v in filters.values()) and not args.all:
            raise InputError(
                "rmb cache prune",
                "no filter given: use --older-than, --endpoint, --model, --stage (or --all to empty the cache)",
                field="--older-than",
            )
        deleted = cache.prune(**filters)
        print(f"deleted {deleted} cached responses; {len(cache)} left in {cache.path}")
    return 0
