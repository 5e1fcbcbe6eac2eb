"""``rmb build``: build a benchmark release with the Prefect flows (the embedded demo by default)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rmb_build.commands._dry_run_plan import print_plan

if TYPE_CHECKING:
    from rmb_build.pipeline.config import BuildConfig

DEMO_CONFIG = "demo.yaml"  # shipped in rmb_build.pipeline
BUILD_LOCK = "build.lock"  # in runs/<name>/ while a build runs (core/lock.py)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        default=None,
        help="build config (YAML); default: the embedded demo (ShareGPT queries, local SmolLM2, no network)",
    )
    p.add_argument("--workdir", default=None, help="folder holding data/ and runs/ (default: $RMB_WORKDIR or .)")
    p.add_argument(
        "--name", default=None, help="build name (folder names under data/ and runs/); overrides the config's"
    )
    p.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop before the LLM calls of this run would cost more (overrides run.max_cost)",
    )
    p.add_argument(
        "--min-gold-agreement",
        type=float,
        default=None,
        metavar="X",
        help="stop before generation when the judge agrees with judge.gold's labels less than X on a goal "
        "(0-1; a rerun resumes from the cache)",
    )
    p.add_argument(
        "--runner",
        choices=["prefect", "local"],
        default="prefect",
        help="prefect (default): each batch a Prefect task (persisted results, the UI; Dask with run.task_runner: "
        'dask and pip install "rmb_build[dask]"); local: in this process, no server (the same release)',
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars or progress lines (-v keeps its meaning: Prefect's own logs)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="gather, dedup, classify and select, then print the LLM calls, tokens and cost a build would spend",
    )


def load_build_config(path: str | None, name: str | None = None):
    """The config at ``path`` (or the embedded demo), with ``name`` overriding its own; (config, file label)."""
    from importlib import resources

    from rmb_build.pipeline.config import load_config, parse_config

    if path is None:
        with resources.as_file(resources.files("rmb_build.pipeline") / DEMO_CONFIG) as demo:
            cfg, label = load_config(demo), f"<embedded {DEMO_CONFIG}>"
    else:
        cfg, label = load_config(path), path
    if name is not None:
        cfg = parse_config({**cfg.model_dump(mode="json", exclude_none=True), "name": name}, f"--name {name!r}")
    return cfg, label


def _print_summary(summary: dict) -> None:
    if summary.get("dry_run"):
        print_plan(f"{summary['selected']} queries selected", summary["estimate"])
        return
    if "release" not in summary:
        print(f"stopped after the last stage listed in 'stages'; working state in {summary['run']}")
        return
    counts = summary["counts"]
    print(f"release: {summary['release']}")
    print(
        f"  {counts['queries']} queries, {counts['answers']} answers; items: "
        + ", ".join(f"{s} {n}" for s, n in counts["items"].items())
    )
    for set_name, goals in counts["per_goal"].items():
        print(f"  {set_name}: " + ", ".join(f"{g} {n}" for g, n in sorted(goals.items())))
    defects = {k: v for k, v in summary.get("audit", {}).items() if v}
    print(
        f"  audit: {defects or 'no defects'}; failures: {summary['failures']['total']} "
        f"(see {summary['run']}/failures.jsonl)"
    )


def kept(args: argparse.Namespace) -> str:
    """What a stopped build keeps for its rerun (the CLI's stop line): every finished batch and the
    LLM replies in its cache, by stage (the rerun asks only for the requests that were in flight)."""
    import sqlite3

    from rmb_build.core.errors import RMBError
    from rmb_build.llm.cache import ResponseCache

    run = getattr(args, "run_folder", None)
    if run is None or not run.is_dir():
        return "nothing to keep yet"
    try:
        with ResponseCache(run / "llm_cache", create=False) as cache:
            by_stage = cache.stats()["by_stage"]
    except FileNotFoundError:
        by_stage = {}
    except (sqlite3.Error, OSError, RMBError) as exc:  # the stop's line is said whatever the cache holds
        return f"every finished batch is kept in {run} (its LLM cache could not be read: {exc})"
    replies = ", ".join(f"{stage or 'other'} {n}" for stage, n in by_stage.items())
    return f"kept in {run}: every finished batch, {sum(by_stage.values())} LLM replies" + (
        f" ({replies})" if replies else ""
    )


def run(args: argparse.Namespace) -> int:
    from rmb_build.core.extras import require

    require("build", "rmb build")
    from rmb_build.core.paths import BuildPaths, workdir

    base = workdir(args.workdir)
    cfg, label = load_build_config(args.config, args.name)
    args.run_folder = BuildPaths.of(cfg.name, base).run  # for kept(), should the build be stopped
    from rmb_build.core import lock
    from rmb_build.pipeline.preflight import preflight

    # every config error surfaces here, before the work folder is made, Prefect or any model starts
    stages = preflight(cfg, label)
    # one build per work folder: a second would send every request again and count half of them
    with lock.hold(args.run_folder / BUILD_LOCK, f"rmb build {cfg.name}: work folder {args.run_folder}"):
        return _build(args, cfg, label, base, stages)


def _build(args: argparse.Namespace, cfg: BuildConfig, label: str, base: Path, stages: list[str]) -> int:
    from rmb_build.commands import debugging

    if not args.no_progress and not args.dry_run:  # the first line at once, not after Prefect's server starts
        import logging

        from rmb_build.pipeline.progress import opening_line

        logging.getLogger("rmb_build.build").info(opening_line(cfg.name, stages, args.runner))

    from rmb_build.pipeline.env import configure_prefect, detach_temporary_server, quiet_prefect
    from rmb_build.pipeline.watchdog import watch_children

    if args.runner == "prefect":
        configure_prefect(base)
    watch_children()  # Prefect's temporary server and the embedded server end with this process, even on SIGKILL
    from rmb_build.pipeline.run import run_build

    if args.runner == "prefect":
        quiet_prefect(debugging(args))
        detach_temporary_server()
    _print_summary(
        run_build(
            cfg,
            base,
            config_file=label,
            max_cost=args.max_cost,
            dry_run=args.dry_run,
            min_gold_agreement=args.min_gold_agreement,
            runner=args.runner,
            progress=not args.no_progress,
        )
    )
    return 0
