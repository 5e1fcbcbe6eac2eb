"""Not a subcommand: what ``rmb publish`` and ``rmb push-results`` share, their ``--repo-id``, ``--private``,
``--dry-run`` and ``--out`` options, the checks of them made before any slow work, and the push or dry run's end."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection


def add_push_options(parser: argparse.ArgumentParser, written: str) -> None:
    """The push options; ``written`` says what ``--out`` receives ("the Hugging Face form")."""
    parser.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Hub dataset to create or update")
    parser.add_argument("--private", action="store_true", help="create the Hub dataset as private")
    parser.add_argument("--dry-run", action="store_true", help="write what would be pushed to --out, push nothing")
    parser.add_argument("--out", metavar="DIR", help=f"where to write {written} (required with --dry-run)")


def check_push_options(args: argparse.Namespace, own_entries: Collection[str], marks: Collection[str]) -> None:
    """One line (RMBError) for a --repo-id not of the form ORG/NAME, a --dry-run without --out, or a push that
    could not start (offline, no token: ``core.hub.check_can_push``); an --out folder holding what the command
    did not write there is refused (``core.atomic.check_out_dir``)."""
    from rmb_build.core.atomic import check_out_dir
    from rmb_build.core.errors import RMBError
    from rmb_build.core.hub import check_can_push, is_hub_id

    if not is_hub_id(args.repo_id):
        raise RMBError(f"--repo-id {args.repo_id!r}: expected ORG/NAME")
    if args.dry_run and not args.out:
        raise RMBError("--dry-run needs --out DIR (the folder to write what would be pushed)")
    if args.out:
        check_out_dir(args.out, own_entries, marks)
    if not args.dry_run:
        check_can_push()  # before any work: offline or without a token nothing could be pushed


def push_unless_dry_run(args: argparse.Namespace, push: Callable[[], str]) -> int:
    """The command's end, once --out is written: with --dry-run a line saying nothing was pushed; otherwise
    ``push()``, and the URL it gives printed. Returns the exit code."""
    if args.dry_run:
        print(f"dry run: nothing pushed to {args.repo_id}")
        return 0
    print(f"pushed to {push()}")
    return 0
