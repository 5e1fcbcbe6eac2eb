"""``rmb audit RELEASE [--json OUT] [--strict] [--fix OUT_DIR] [--review LABELS] [--no-embeddings | --embeddings DIR]``:
find a release's defects."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rmb_build.commands._embedding_option import add_embedding_options, embedding_store, report_store
from rmb_build.core.lock import locks_out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "release",
        help="an RMB release: its folder, its Hugging Face form (a folder or Hub id), or rmb (the official release)",
    )
    parser.add_argument(
        "--json", metavar="OUT", help="write the audit JSON (counts of every defect kind, and the defects) to OUT"
    )
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when any defect is found")
    parser.add_argument(
        "--fix",
        metavar="OUT_DIR",
        help="write a copy without the defective items to OUT_DIR (RMB layout), items whose uid an "
        "earlier item has renumbered, and logs of what was removed and renumbered (OUT_DIR/removed.jsonl, "
        "OUT_DIR/renumbered.jsonl); the input is never touched",
    )
    parser.add_argument(
        "--no-embeddings",
        action="store_true",
        help="skip the embedding model: near-duplicate prompts are then found only when equal",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.95,
        metavar="COS",
        help="cosine at or above which two prompts are near-duplicates (default 0.95)",
    )
    parser.add_argument(
        "--review",
        metavar="LABELS",
        help="people's labels of the release (labels.jsonl from 'rmb review export'): items they overruled "
        "or flagged are human_disagrees defects (which --fix removes)",
    )
    parser.add_argument(
        "--shortcuts",
        action="store_true",
        help="also test trivial scorers (longer, shorter, more Markdown, more list items, more prompt overlap, "
        "the refusal wins) per subset against chance (exact binomial, Holm-corrected, flagged at p < 0.01); "
        "reads any benchmark format",
    )
    parser.add_argument(
        "--consensus",
        nargs="+",
        metavar="EVAL_DIR",
        help="three or more 'rmb evaluate' folders of this release: the items whose label most RMs contradict, "
        "ranked, and each scenario's rate of suspected label errors (audit JSON: consensus)",
    )
    add_embedding_options(parser)


# root files --fix writes itself (a source's own logs of an earlier fix are replaced by this fix's)
FIX_WRITES = ("manifest.json", "removed.jsonl", "renumbered.jsonl")


def format_table(report, limit: int | None = None) -> str:
    """Counts per kind, then one line per defect: kind, set, uid, file, detail."""
    from rmb_build.release.audit import defects_phrase

    counts = report.counts
    width = max(len(k) for k in counts)
    lines = [f"audit of {report.release}: {defects_phrase(report.total, len(report.flagged_items()))}"]
    lines += [f"  {k:<{width}}  {n:>6}" for k, n in counts.items()]
    rows = [(k, d) for k, entries in report.defects.items() for d in entries]
    if rows:
        lines.append("")
        lines.append(f"{'kind':<{width}}  {'set':<8}  {'uid':<8}  file: detail")
    for n, (kind, d) in enumerate(rows):
        if limit is not None and n >= limit:
            lines.append(f"... and {len(rows) - limit} more (see --json)")
            break
        lines.append(f"{kind:<{width}}  {d['set']:<8}  {d['uid']:<8}  {d['file']}: {d['detail']}")
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def _check_fix_target(out: Path, release) -> None:
    from rmb_build.core.errors import RMBError

    out_r = out.resolve()
    if release.root is not None:
        root = release.root.resolve()
        if out_r == root or root in out_r.parents or out_r in root.parents:
            raise RMBError(f"--fix {out}: must be outside the audited release ({release.root})")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RMBError(f"--fix {out}: exists and is not an empty folder; choose a new folder")


@locks_out("fix", "--fix")
def run(args: argparse.Namespace) -> int:
    from rmb_build.benchmarks.formats import RMB, open_release
    from rmb_build.core import atomic
    from rmb_build.core.errors import RMBError
    from rmb_build.release import write_release
    from rmb_build.release.audit import audit_release, fix_release
    from rmb_build.release.carry import STYLE_REFUSED, carry_parts, removed_keys
    from rmb_build.release.read import MANIFEST_FILE

    if not 0.0 < args.threshold <= 1.0:
        raise RMBError(f"--threshold {args.threshold}: must be in (0, 1]")
    release = open_release(args.release, None if args.shortcuts else RMB, strict=False)
    print(release.read_summary())
    if args.fix:
        _check_fix_target(Path(args.fix), release)  # before the slow part: fail early
    review = None
    if args.review:
        from rmb_build.release.review_labels import human_verdicts, read_labels

        review = human_verdicts(read_labels(args.review))
    store = None if args.no_embeddings else embedding_store(args)
    report = audit_release(
        release, near_duplicates=not args.no_embeddings, near_threshold=args.threshold, embed=store, review=review
    )
    if release.account is not None:
        report.checks["read"] = release.account.to_json()
    if review is not None:
        known = {(it.set_name, str(it.uid)) for it in release.items()}
        missing = [f"{s}/{u}" for s, u in review if (s, u) not in known]
        if missing:
            print(f"note: {len(missing)} overruled or flagged items of {args.review} are not in this release")
    if args.shortcuts:
        from rmb_build.release.audit.shortcuts import format_shortcuts, shortcut_table

        report.shortcuts = shortcut_table(release.items())
    consensus = None
    if args.consensus:
        from rmb_build.evaluate.consensus import consensus as label_consensus
        from rmb_build.evaluate.consensus import read_evaluations

        consensus = label_consensus(read_evaluations(args.consensus))
    print(format_table(report))
    if report.shortcuts is not None:
        print(format_shortcuts(report.shortcuts))
    report_store(store)
    if consensus is not None:
        from rmb_build.evaluate.consensus import format_consensus

        print(format_consensus(consensus))
    if args.json:
        atomic.write_json(
            args.json, report.to_json() if consensus is None else {**report.to_json(), "consensus": consensus}
        )
        print(f"audit JSON written to {args.json}")
        if consensus is not None:
            print(
                f"to check the likeliest label errors first: rmb review serve RELEASE --db REVIEW.db --queue {args.json}"
            )
    if args.fix:
        clean, log = fix_release(release, report)
        removed = [line for line in log if line["action"] == "removed"]
        renumbered = [line for line in log if line["action"] == "renumbered"]
        kept = {(it.set_name, it.uid) for it in clean.items()}
        all_annotations = release.annotations()
        # a renumbered item's annotations cannot be told from its uid's first holder's: they stay with that one
        annotations = [a for a in all_annotations if (a.get("set"), str(a.get("uid"))) in kept]
        manifest = dict(release.manifest or {})
        manifest["audit_fix"] = {
            "source": str(args.release),
            "removed": len(removed),
            "renumbered": len(renumbered),
            "counts": report.counts,
            "notes": report.notes,
        }
        out = Path(args.fix)
        with atomic.atomic_dir(out, flag="--fix") as tmp:  # the whole copy or none of it
            write_release(clean, tmp, annotations=annotations if all_annotations else None, manifest=None)
            atomic.write_jsonl(tmp / "removed.jsonl", removed)
            if renumbered:
                atomic.write_jsonl(tmp / "renumbered.jsonl", renumbered)
            # everything else the release holds goes along; the style records of removed items go with them
            rewritten = FIX_WRITES + (("annotations.jsonl",) if all_annotations else ())
            unusable = {(d["file"], d["index"]) for k in STYLE_REFUSED for d in report.defects.get(k, [])}
            carried = carry_parts(release, tmp, rewritten, removed_keys(release, clean), unusable)
            if carried:
                manifest["audit_fix"]["carried"] = carried.to_json()
            atomic.write_json(tmp / MANIFEST_FILE, manifest)
        said = f"removed {len(removed)} items (log: {out / 'removed.jsonl'})"
        if renumbered:
            said += f", renumbered {len(renumbered)} (log: {out / 'renumbered.jsonl'})"
        print(
            f"cleaned copy written to {out}: {said}, kept {len(kept)}" + (f"; {carried.summary()}" if carried else "")
        )
    if args.strict and report.total:
        print(f"rmb audit: --strict: {report.total} defects found", file=sys.stderr)
        return 1
    return 0
