"""``rmb compare DIR_A DIR_B``: does reward model A really beat B? A paired test over the items both scored gives
every figure's 95% interval and p-value (macro and micro, per set and goal, and RMB's headline).

Only like with like: A and B must have scored the same release (the sha256 their results.json record);
otherwise, or when a results.json records none, the command stops with one line naming both, unless
``--shared-texts`` asks to compare on the texts both share, which the table and JSON then state.
"""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir_a", help="an 'rmb evaluate --out' folder")
    p.add_argument("dir_b", help="another one, on the same release (or any release, with --shared-texts)")
    p.add_argument(
        "--shared-texts",
        action="store_true",
        help="compare evaluations of different releases (or ones that record no release sha256) on the "
        "items both hold with equal texts: set, conversation turns' role and content, and answers; "
        "the output says how many items each side had and how many matched",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=10_000,
        metavar="DRAWS",
        help="Monte Carlo draws of the paired test; every interval and p-value comes from the same ones",
    )
    p.add_argument("--seed", type=int, default=0, help="the draws' seed")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    from rmb_build.core.atomic import write_json
    from rmb_build.core.errors import RMBError
    from rmb_build.evaluate.compare import compare, render_table

    if args.resamples < 1:
        raise RMBError("--resamples must be at least 1")
    result = compare(args.dir_a, args.dir_b, resamples=args.resamples, seed=args.seed, shared_texts=args.shared_texts)
    if not any(s in result for s in ("pairwise", "bon")):
        raise RMBError(f"{args.dir_a} and {args.dir_b} share no items (matched by {result['matching']['by']})")
    print(render_table(result))
    if args.json:
        write_json(args.json, result)
    return 0
