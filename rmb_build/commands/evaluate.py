"""``rmb evaluate``: score a reward model against a release (RMB layout, local HF folder or Hub id)."""

from __future__ import annotations

import argparse
from typing import Iterator

from rmb_build.core.intervals import DEFAULT_DRAWS, MAX_DRAWS
from rmb_build.core.lock import locks_out
from rmb_build.evaluate.cache import DEFAULT_CACHE_HELP, default_cache_dir
from rmb_build.evaluate.rm_options import add_flags

# What an evaluation writes into --out; a folder holding anything else is not replaced.
OUT_ENTRIES = {"results.json", "predictions.jsonl", "style_predictions.jsonl", "report.md", "heatmap.png"}
OUT_MARKS = {"results.json"}


def release_format(name: str) -> str:
    """``--format``'s value: rmb or a registered benchmark format (read when given, so that help stays light)."""
    from rmb_build.benchmarks.formats import check_format
    from rmb_build.core.errors import RMBError

    try:
        return check_format(name)
    except RMBError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class FormatChoices:
    """``--format``'s choices, the registry's formats: listed when help or a check reads them, so that
    building the parser imports no format module."""

    def __iter__(self) -> Iterator[str]:
        from rmb_build.benchmarks.formats import format_names

        return iter(format_names())

    def __contains__(self, name: object) -> bool:
        return name in list(self)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--release",
        default=None,
        help="(this or --suite) an RMB release folder, a local Hugging Face folder, a RewardBench / RewardBench 2 / RM-Bench / "
        "JudgeBench file or folder (JSON, JSONL, Parquet), a Hub id, or 'rmb': the official RMB release, "
        "downloaded once into ~/.cache/rmb/releases/ (from $RMB_RELEASE_URL when set)",
    )
    p.add_argument(
        "--suite",
        default=None,
        metavar="NAME|FILE",
        help="instead of --release: several benchmarks in one run, each under its authors' protocol (unless "
        "--protocol), one score cache, one results folder each under --out and the row across them "
        "(suite.md, suite.json, suite.html): a suite file (YAML or JSON: benchmarks: [{release, name, format, protocol}]) "
        "or 'field' (RMB, RewardBench, RewardBench 2, RM-Bench, JudgeBench; those not found here are listed "
        "as missing)",
    )
    p.add_argument(
        "--format",
        default=None,
        type=release_format,
        choices=FormatChoices(),
        metavar="FORMAT",
        help="the release's format: %(choices)s (rmb, or a benchmark format of rmb_build/benchmarks/; default: "
        "detected from its fields)",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--rm",
        metavar="SPEC",
        help="hf:<path|hub id>, openai:<model>[@<endpoint|base URL>], python:<module>:<function>, "
        "dpo:<policy>,<reference>, baseline:length, baseline:random, scores:<file> (= --scores)",
    )
    which.add_argument(
        "--scores",
        metavar="FILE",
        help="scores computed elsewhere, instead of --rm: RMB's own result file (the JSON list its "
        "eval/scripts/my_run_rm.py writes: pair_uid, category_path, chosen_reward, reject_reward, "
        "is_correct; BoN rows in that shape, which RMB's code does not write: bon_uid, category_path, "
        "bon_best_reward, loser_list_reward), or "
        'JSONL, one object a line: {"set": "pairwise", "uid", "chosen", "rejected"} or '
        '{"set": "bon", "uid", "best", "losers": [...]} (category_path optional), or a '
        "folder of such files. Rows match items by (set, uid); release items the file lacks are "
        "listed (results.json scores_file) and left out of the figures, not counted as losses",
    )
    p.add_argument(
        "--out",
        required=True,
        help="folder for results.json, predictions.jsonl, report.md, heatmap.png "
        "(refused if it exists and is not empty, unless --overwrite)",
    )
    p.add_argument("--overwrite", action="store_true", help="write into an --out folder that already holds files")
    p.add_argument(
        "--ties",
        choices=("strict", "half"),
        default=None,
        help="a pairwise tie counts 0 (strict, as RMB's script) or 0.5 (half); default: the protocol's (strict)",
    )
    add_flags(p, "protocol", "devices", "batch_size", "deterministic")
    p.add_argument(
        "--cache",
        default=None,
        help=f"score cache folder (default: {DEFAULT_CACHE_HELP}; here {default_cache_dir()}; "
        "<workdir>/runs/score_cache when --workdir is given)",
    )
    p.add_argument("--workdir", default=None, help="a project folder whose runs/score_cache holds the scores")
    p.add_argument(
        "--skip-defective",
        action="store_true",
        help="leave out of scoring the items the audit finds defective (identical pairs, duplicates, ...)",
    )
    add_flags(
        p,
        "dtype",
        "max_length",
        "chat_template",
        "device",
        "trust_remote_code",
        "family",
        "device_map",
        "max_memory",
        "load_in",
        "revision",
        "attn_implementation",
    )
    p.add_argument("--config", default=None, help="build config whose endpoints openai:<model>@<name> may name")
    add_flags(p, "votes", "judge_mode", "with_criteria", "structured_output")
    p.add_argument("--seed", type=int, default=0, help="baseline:random's seed (recorded in results.json)")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=DEFAULT_DRAWS,
        metavar="DRAWS",
        help="recorded in results.json (default %(default)s); no interval evaluate prints draws any more (mid-p, "
        "or Wilson's at an effective size: docs/calibration.md), so it changes no figure",
    )
    p.add_argument(
        "--min-coverage",
        type=_fraction,
        default=1.0,
        metavar="FRACTION",
        help="with --scores: the least share of the items to score the file must cover (default 1: every item); "
        "below it evaluate refuses",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="with --scores: report figures over the items the file covers, however few; the headline says "
        "'partial: N of M items' and results.json coverage.partial is true",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share of the items from 0 (exclusive) to 1, got {text!r}")
    return value


SUITE_FILES = {"suite.json", "suite.md", "suite.html"}


@locks_out()
def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmb_build.core.atomic import check_out_dir
    from rmb_build.core.errors import RMBError
    from rmb_build.core.paths import workdir
    from rmb_build.evaluate.adapters import check_rm
    from rmb_build.evaluate.rm_options import from_args

    if (args.release is None) == (args.suite is None):
        raise RMBError(
            "the following arguments are required: --release (or --suite NAME|FILE for several benchmarks)"
            if args.release is None
            else "--release and --suite: give one (a suite names its releases)"
        )
    if args.suite is not None and (args.format is not None or args.scores is not None):
        raise RMBError(
            f"{'--format' if args.format is not None else '--scores'} applies to --release; a suite's benchmarks "
            "are scored by --rm, each in the format its suite file gives or its own"
        )
    suite = None
    if args.suite is not None:
        from rmb_build.evaluate.suite import read_suite

        suite = read_suite(args.suite)
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.overwrite:
        raise RMBError(
            f"--out {out}: {'exists and is not empty' if out.is_dir() else 'is a file'}; "
            "add --overwrite to replace its results, or choose another folder"
        )
    owned, marks = _owned(suite[0] if suite else None)
    check_out_dir(out, owned, marks)  # --overwrite replaces an earlier evaluation, nothing else

    given = from_args(args)  # every RM option checked before any work
    spec = f"scores:{args.scores}" if args.scores else args.rm
    check_rm(spec)  # a bad --rm is refused before the release is read
    if not 1 <= args.bootstrap <= MAX_DRAWS:  # a page reads back what evaluate writes (results_check)
        raise RMBError(f"--bootstrap must be 1 to {MAX_DRAWS:,}")
    if given.get("devices") and args.device:
        raise RMBError("--devices and --device: give one (--devices runs one replica on each)")
    config = None
    if args.config:
        from rmb_build.pipeline.config import load_config

        config = load_config(args.config)
    cache_dir = (
        Path(args.cache)
        if args.cache
        else workdir(args.workdir) / "runs" / "score_cache"
        if args.workdir
        else default_cache_dir()
    )
    one = _Evaluation(args, spec, given, config, cache_dir)
    if suite is not None:
        return _run_suite(one, suite[0], suite[1], out, owned, marks)
    from rmb_build.benchmarks.formats import open_release
    from rmb_build.core.atomic import atomic_dir

    release = open_release(args.release, args.format)
    print(release.read_summary())
    with atomic_dir(out, owned, marks) as tmp:  # whole or absent; an earlier one replaced as a whole
        results = one(release, str(args.release), tmp)
    _print_summary(results, args, out)
    return 0


def _owned(entries) -> tuple[set[str], set[str]]:
    """What an evaluation (or a suite's, its benchmarks' folders) writes into --out, and what marks it as one."""
    if entries is None:
        return OUT_ENTRIES, OUT_MARKS
    return SUITE_FILES | {e.folder for e in entries}, {"suite.json"}


class _Evaluation:
    """One release evaluated with the command's RM and options, into a folder (results.json and the rest)."""

    def __init__(self, args: argparse.Namespace, spec: str, given: dict, config, cache_dir) -> None:
        self.args, self.spec, self.given, self.config, self.cache_dir = args, spec, given, config, cache_dir

    def __call__(self, release, label: str, folder, protocol_name: str | None = None) -> dict:
        from rmb_build.core.atomic import write_json
        from rmb_build.evaluate.adapters import RMOptions, load_rm
        from rmb_build.evaluate.protocols import default_for, protocol
        from rmb_build.evaluate.run import evaluate
        from rmb_build.release.provenance import command_line

        args = self.args
        fmt = getattr(release, "benchmark_format", None) or "rmb"
        chosen = protocol(args.protocol or protocol_name or default_for(fmt))
        options = RMOptions(
            **{**self.given, "protocol": chosen.name},
            seed=args.seed,
            endpoints=self.config.endpoints if self.config else None,
            llm_cache_dir=str(self.cache_dir / "llm"),
        )
        rm = load_rm(self.spec, options)
        results = evaluate(
            release,
            rm,
            folder,
            self.cache_dir,
            ties=args.ties or chosen.ties,
            resamples=args.bootstrap,
            seed=args.seed,
            release_label=label,
            progress=not args.no_progress,
            skip_defective=args.skip_defective,
            min_coverage=0.0 if args.allow_partial else args.min_coverage,
        )
        # What produced these results, for `rmb leaderboard`: added after the fact, secrets redacted.
        results.update(command=command_line("evaluate", args, configure))
        write_json(folder / "results.json", results)
        return results


def _run_suite(one: _Evaluation, entries, builtin: bool, out, owned: set[str], marks: set[str]) -> int:
    """Each benchmark of the suite into its folder under --out, then suite.json and suite.md: all or nothing."""
    from rmb_build.benchmarks.formats import open_release
    from rmb_build.core.atomic import atomic_dir, write_text
    from rmb_build.core.errors import RMBError
    from rmb_build.core.redact import redact
    from rmb_build.evaluate import suite as S

    rows, missing = [], []
    with atomic_dir(out, owned, marks) as tmp:
        for entry in entries:
            try:
                release = open_release(entry.release, entry.format)
            except (RMBError, OSError) as exc:
                if not builtin:
                    raise RMBError(f"--suite {one.args.suite}: benchmark {entry.name!r}: {exc}") from None
                missing.append({"benchmark": entry.name, "release": entry.release, "reason": str(exc)})
                print(redact(f"{entry.name}: missing here ({exc})"))
                continue
            print(f"{entry.name}: {release.read_summary()}")
            folder = tmp / entry.folder
            folder.mkdir()
            rows.append(S.row(entry, one(release, entry.release, folder, entry.protocol)))
        if not rows:
            raise RMBError(
                f"--suite {one.args.suite}: none of its benchmarks is here: "
                + "; ".join(f"{m['benchmark']}: {m['reason']}" for m in missing)
            )
        table = S.table(one.spec, rows, missing)
        write_text(tmp / "suite.json", S.dumps(table))
        write_text(tmp / "suite.md", S.markdown(table))
        from rmb_build.leaderboard.site import suite_page

        write_text(tmp / "suite.html", suite_page(table))
    print(S.markdown(table), end="")
    scored = sum(r["scored"] or 0 for r in rows)
    print(f"scored {scored} texts over {len(rows)} benchmarks; wrote {out / 'suite.md'}, suite.json and suite.html")
    return 0


def _print_summary(results: dict, args: argparse.Namespace, out) -> None:
    import sys

    from rmb_build.evaluate.coverage import partial_note
    from rmb_build.evaluate.protocols import label, ties_phrase

    s = results["scoring"]
    # every headline says how it was measured, and over how much of the release
    said = [partial_note(results), label(results["protocol"]), ties_phrase(results["ties"], results["protocol"])]
    under = f"[{', '.join(w for w in said if w)}]"
    headline = results["rmb_overall"]
    if headline["mean"] is not None:
        cells = "  ".join(f"{c} {100 * v:.1f}" for c, v in headline["cells"].items() if v is not None)
        print(f"RMB overall {100 * headline['mean']:.1f} (mean of macro cells: {cells}) {under}")
    for set_name in ("pairwise", "bon"):
        overall = results[set_name].get("overall")
        if overall:
            print(
                f"{set_name:9s} overall macro {100 * overall['macro']:.1f}  micro {100 * overall['micro']:.1f}  "
                f"(n={overall['n']}) {under}"
            )
    bench = results.get("benchmark")
    if bench and bench.get("headline") is not None:
        print(f"{bench['format']} headline {100 * bench['headline']:.1f} {under}")
    elif bench:
        print(f"{bench['format']} headline: none ({bench.get('headline_reason', 'no figure')}) {under}")
    if "scores_file" in results:
        from rmb_build.evaluate.scores_file import summary_line

        print(summary_line(results["scores_file"]), file=sys.stderr)
        print(
            f"read {s['from_file']} scores of {results['scores_file']['matched']} items; wrote {out / 'results.json'}"
        )
        return
    print(
        f"scored {s['scored']} texts, {s['cached']} from the cache ({s['unique']} unique of {s['naive']}); "
        f"wrote {out / 'results.json'}"
    )
