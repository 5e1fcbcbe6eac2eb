"""``rmb publish RELEASE --repo-id ORG/NAME [--license ID] [--private] [--review AGREEMENT] [--dry-run --out DIR]``.

Writes the release's Hugging Face form (Parquet per configuration + dataset card) and pushes it.
The Hugging Face token comes from ``HF_TOKEN`` or the Hugging Face login and is never written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rmb_build.commands._hub_push import add_push_options, check_push_options, push_unless_dry_run
from rmb_build.core.lock import locks_out

# What an earlier publish of ours leaves in --out; anything else there is someone else's and is kept safe.
OWN_ENTRIES = {"README.md", "manifest.json", "pairwise", "bon", "style"}
MARKS = {"README.md"}  # written by every publish


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "release",
        help="an RMB release: its folder, its Hugging Face form (a folder or Hub id), or rmb (the official release)",
    )
    add_push_options(parser, "the Hugging Face form")
    parser.add_argument(
        "--license",
        metavar="ID",
        help="Hugging Face licence id for the card (e.g. cc-by-4.0; 'other' takes license_name "
        "from the build config); required when the release's manifest.json names none. "
        "Without it, a licence the Hub does not list goes on the card as 'other'",
    )
    parser.add_argument(
        "--review",
        metavar="AGREEMENT",
        help="people's agreement with the release's labels (agreement.json from 'rmb review export') for the card",
    )
    parser.add_argument(
        "--no-embeddings",
        action="store_true",
        help="audit without the embedding model (near-duplicates only when equal)",
    )


def _review(path: str, release) -> dict:
    """agreement.json, refused unless it is of this very release (its sha256)."""
    from rmb_build.core.errors import InputError
    from rmb_build.release.provenance import release_sha256
    from rmb_build.release.rmb_format import load_json_file

    if not Path(path).is_file():
        raise InputError(path, "no such file")
    review = load_json_file(Path(path), path)
    recorded = (review.get("release") or {}).get("sha256") if isinstance(review, dict) else None
    if not recorded:
        raise InputError(path, "not an agreement.json of 'rmb review export' (no release sha256)", field="release")
    if recorded != release_sha256(release):
        raise InputError(path, f"its labels are of another release (sha256 {recorded[:12]})", field="release")
    return review


@locks_out()
def run(args: argparse.Namespace) -> int:
    from rmb_build.benchmarks.formats import RMB, open_release
    from rmb_build.core import atomic
    from rmb_build.core.redact import redact_json
    from rmb_build.release.audit import audit_release
    from rmb_build.release.card import card_license, check_card_license, render_card
    from rmb_build.release.hf import push_release, write_hf_release

    check_push_options(args, OWN_ENTRIES, MARKS)  # before the slow part: fail early
    release = open_release(args.release, RMB)
    if release.manifest is not None:  # a manifest made by hand or by an older build may hold a credential
        release.manifest = redact_json(release.manifest)
    check_card_license(card_license(release.manifest, args.license).header())  # refuse before the slow audit
    review = _review(args.review, release) if args.review else None
    annotations = release.annotations()
    report = audit_release(release, near_duplicates=not args.no_embeddings)
    card = render_card(
        release, repo_id=args.repo_id, license=args.license, audit=report, annotations=annotations, review=review
    )
    if args.out:
        with atomic.atomic_dir(args.out, OWN_ENTRIES, MARKS) as tmp:  # replaces an earlier publish as a whole
            written = write_hf_release(release, tmp, card, annotations=annotations)
        print(f"wrote {len(written)} files to {args.out} ({report.total} audit defects noted in the card)")
    return push_unless_dry_run(
        args, lambda: push_release(release, args.repo_id, card, private=args.private, annotations=annotations)
    )
