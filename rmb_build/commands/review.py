"""``rmb review serve|export|import``: people label a sample of a release's items on a local web page;
their labels become agreement figures and a gold release."""

from __future__ import annotations

import argparse

from rmb_build.core.lock import locks_out

# What either export format writes into --out: an earlier export is replaced as a whole, anything else refused.
OUT_ENTRIES = {
    "labels.jsonl",
    "unjudged.jsonl",
    "agreement.json",
    "agreement.md",
    "gold",
    "tasks.json",
    "config.xml",
}
OUT_MARKS = {"labels.jsonl", "agreement.json", "tasks.json"}


def configure(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser(
        "serve",
        help="the review page: one URL per annotator (127.0.0.1 by default)",
        description="Serve the review page of RELEASE; labels go to --db as they are given (a restart resumes).",
    )
    s.add_argument("release", help="the release to review: its folder (RMB layout) or its Hugging Face form")
    s.add_argument("--db", required=True, help="the review's SQLite file (made on the first start)")
    s.add_argument(
        "--annotator",
        action="append",
        default=[],
        metavar="NAME",
        help="a person who labels (repeatable; needed on the first start, which plans the review)",
    )
    s.add_argument("--sample", type=int, default=None, metavar="N", help="items in all (default: every item)")
    s.add_argument(
        "--overlap",
        type=float,
        default=None,
        metavar="F",
        help="share of the sample every annotator labels, for agreement between people (default 0.2)",
    )
    s.add_argument("--seed", type=int, default=None, help="sampling and order seed (default 0)")
    s.add_argument(
        "--queue",
        default=None,
        metavar="AUDIT_JSON",
        help="review in the order of an audit's consensus ranking (rmb audit RELEASE --consensus DIR... --json "
        "AUDIT_JSON): the items whose label most reward models contradict first, for every annotator; --sample N "
        "takes the first N",
    )
    s.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs tokens)"
    )
    s.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    s.add_argument("--new-tokens", action="store_true", help="make new annotator tokens (the old links stop working)")
    e = sub.add_parser(
        "export",
        help="labels.jsonl, agreement.json/.md and the gold release",
        description="Write labels.jsonl, agreement.json, agreement.md and gold/ (RMB layout) under --out; "
        "or, with --format label-studio, tasks and a labelling config for Label Studio.",
    )
    e.add_argument("--db", required=True, help="the review's SQLite file")
    e.add_argument("--out", required=True, help="folder to write")
    e.add_argument(
        "--release", default=None, help="the reviewed release (default: the path review.db recorded at its start)"
    )
    e.add_argument(
        "--format",
        choices=["rmb", "label-studio"],
        default="rmb",
        help="rmb: labels, figures and gold (default); label-studio: tasks.json and config.xml of the planned pairwise items",
    )
    i = sub.add_parser(
        "import",
        help="read Label Studio's JSON export back into review.db",
        description="Read a Label Studio JSON export of tasks made by 'rmb review export --format label-studio'.",
    )
    i.add_argument("export", help="Label Studio's JSON export (a list of tasks with their annotations)")
    i.add_argument("--db", required=True, help="the review's SQLite file")
    i.add_argument(
        "--release",
        default=None,
        help="the reviewed release, whose items the tasks must name (default: the path review.db recorded)",
    )


def _release(path: str):
    from rmb_build.benchmarks.formats import RMB, open_release

    return open_release(path, RMB, strict=False)


def _store_and_release(args: argparse.Namespace):
    """The review's store (--db) and the release it reviews (--release, or the one it recorded)."""
    from pathlib import Path

    from rmb_build.core.errors import RMBError
    from rmb_build.review.store import ReviewStore

    if not Path(args.db).is_file():
        raise RMBError(f"--db {args.db}: no such file")
    store = ReviewStore(args.db)
    source = args.release or store.meta().get("release_path")
    if not source:
        raise RMBError(f"{args.db}: records no release; give --release")
    return store, _release(source)


# One server per database: a second would plan the same review again (and fail on it), and split the
# annotators between two pages whose undo and progress do not see each other's. It is refused, naming the first.
@locks_out("db", "--db", hint="another 'rmb review serve' serves it: send annotators to that one, or stop it first")
def _serve(args: argparse.Namespace) -> int:
    from pathlib import Path
    from urllib.parse import quote

    import uvicorn

    from rmb_build.review.app import MAX_BODY, create_app
    from rmb_build.review.deadlines import server_config
    from rmb_build.review.session import Settings, is_loopback, open_session

    release = _release(args.release)
    loopback = is_loopback(args.host)
    source = str(Path(args.release).resolve()) if Path(args.release).exists() else args.release
    page, tokens = open_session(
        args.db,
        release,
        source,
        # the queue's file by its full path: a resume that names it from another folder is the same review
        Settings(
            args.annotator,
            args.sample,
            args.overlap,
            args.seed,
            str(Path(args.queue).resolve()) if args.queue else None,
        ),
        require_token=not loopback,
        new_tokens=args.new_tokens,
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"review of {page.release_name}: labels go to {args.db}")
    for name in page.store.annotators():
        done, total = page.store.progress(name)
        url = f"http://{host}:{args.port}/a/{quote(name, safe='')}"
        if loopback:
            print(f"  {name}: {url}  ({done} of {total} labelled)")
        elif tokens.get(name):
            print(f"  {name}: {url}?t={tokens[name]}  ({done} of {total} labelled; this link is printed once)")
        else:
            print(
                f"  {name}: {url}?t=<the token printed when it was made>  ({done} of {total}; --new-tokens for new links)"
            )
    print("keys: 1/2 (or the answer's number) better, t tie, x both bad, s skip, u undo; Ctrl-C stops", flush=True)
    uvicorn.Server(server_config(create_app(page), args.host, args.port, MAX_BODY)).run()
    return 0


@locks_out()
def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmb_build.core.atomic import atomic_dir, check_out_dir

    check_out_dir(args.out, OUT_ENTRIES, OUT_MARKS)
    store, release = _store_and_release(args)
    if args.format == "label-studio":
        from rmb_build.review.label_studio import export_tasks

        with atomic_dir(args.out, OUT_ENTRIES, OUT_MARKS) as tmp:
            n = export_tasks(store, release, tmp)
        print(
            f"{n} pairwise tasks written to {Path(args.out) / 'tasks.json'}, labelling config to {Path(args.out) / 'config.xml'}"
        )
        return 0
    from rmb_build.review.export import export

    with atomic_dir(args.out, OUT_ENTRIES, OUT_MARKS) as tmp:  # replaces an earlier export whole: no stale gold/
        summary = export(store, release, tmp)
    print(
        f"{summary['labels']} labels of {summary['items']} items written to {Path(args.out) / 'labels.jsonl'}; "
        f"figures in agreement.json and agreement.md; {summary['gold']} agreed items in "
        f"{Path(args.out) / 'gold' if summary['gold'] else '(no gold release: no item has two agreeing people)'}"
    )
    return 0


def _import(args: argparse.Namespace) -> int:
    from rmb_build.review.label_studio import import_export

    store, release = _store_and_release(args)
    n = import_export(store, args.export, release)
    print(f"{n} labels read from {args.export} into {args.db}")
    return 0


def run(args: argparse.Namespace) -> int:
    return {"serve": _serve, "export": _export, "import": _import}[args.action](args)
