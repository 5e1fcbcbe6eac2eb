"""``rmb push-results EVAL_DIR --repo-id ORG/NAME [--private] [--dry-run --out DIR]``.

Writes an ``rmb evaluate`` output (results.json and the per-item predictions, as Parquet) as a Hugging Face
dataset with a card, and pushes it; ``rmb leaderboard`` reads it back from the folder or the Hub id. The
token comes from ``HF_TOKEN`` or the Hugging Face login and is never written.
"""

from __future__ import annotations

import argparse

from rmb_build.commands._hub_push import add_push_options, check_push_options, push_unless_dry_run
from rmb_build.core.lock import locks_out

MARKS = {"README.md"}  # written by every push-results


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("eval_dir", metavar="EVAL_DIR", help="an 'rmb evaluate --out' folder")
    add_push_options(parser, "the dataset")


@locks_out()
def run(args: argparse.Namespace) -> int:
    import tempfile

    from rmb_build.core import atomic
    from rmb_build.evaluate.published import ENTRIES, push_form, read_evaluation, write_form

    check_push_options(args, ENTRIES, MARKS)
    results, rows = read_evaluation(args.eval_dir)
    if args.out:
        with atomic.atomic_dir(args.out, ENTRIES, MARKS) as tmp:  # replaces an earlier output as a whole
            write_form(results, rows, tmp, args.repo_id)
        print(f"wrote {args.out}: results.json and {len(rows)} item predictions, with a card")

    def push() -> str:
        if args.out:
            return push_form(args.out, args.repo_id, private=args.private)
        with tempfile.TemporaryDirectory(prefix="rmb-push-") as tmp:
            write_form(results, rows, tmp, args.repo_id)
            return push_form(tmp, args.repo_id, private=args.private)

    return push_unless_dry_run(args, push)
