"""``rmb leaderboard RESULTS_DIR... --out SITE``: a static site comparing reward models, viewable from disk.

A RESULTS_DIR is an ``rmb evaluate --out`` folder or what ``rmb push-results`` made of one (its folder, or
the Hub id it was pushed to).

RMs are ranked only against RMs scored on the same release (the sha256 each results.json records): folders of
different releases, or ones that record no release sha256, stop the command with one line naming them, unless
``--group-by-release`` asks for one table per release, each ranked and tested on its own (a folder without a
sha256 then stands alone in its table).
"""

from __future__ import annotations

import argparse

from rmb_build.core.lock import locks_out

OUT_ENTRIES, OUT_MARKS = {"index.html", "rm"}, {"index.html"}  # what a site holds; an earlier one is replaced


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS_DIR",
        help="'rmb evaluate --out' folders, one per RM, or their 'rmb push-results' form (a folder or a Hub id)",
    )
    p.add_argument("--out", required=True, metavar="SITE", help="folder for index.html and the per-RM pages")
    p.add_argument("--title", default="Reward model leaderboard")
    p.add_argument(
        "--group-by-release",
        action="store_true",
        help="folders of several releases: one table per release, each ranked and tested on its own "
        "(without it they are refused; RMs of different releases are never ranked against each "
        "other)",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=None,
        metavar="DRAWS",
        help="Monte Carlo draws of the paired test between neighbouring RMs (default: rmb compare's)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--downstream",
        default=None,
        metavar="DIR",
        help="an 'rmb downstream --out' folder: each RM's best-of-N downstream score as a column, and its "
        "correlation with the benchmark above the table",
    )


@locks_out()
def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmb_build.core.atomic import atomic_dir
    from rmb_build.core.errors import RMBError
    from rmb_build.leaderboard import build_site

    if args.resamples is not None and args.resamples < 1:
        raise RMBError("--resamples must be at least 1")
    extra = {} if args.resamples is None else {"resamples": args.resamples}
    with atomic_dir(args.out, OUT_ENTRIES, OUT_MARKS) as tmp:
        index = build_site(
            args.results,
            tmp,
            seed=args.seed,
            title=args.title,
            group_by_release=args.group_by_release,
            downstream=args.downstream,
            **extra,
        )
    print(f"wrote {Path(args.out) / index.name} ({len(args.results)} reward models); open it in a browser")
    return 0
