"""``rmb downstream``: does the benchmark predict alignment? Each RM picks the best of n policy samples on
held-out prompts, the picks are graded, and benchmark accuracy is correlated with the graded picks."""

from __future__ import annotations

import argparse

from rmb_build.commands._dry_run_plan import print_plan
from rmb_build.core.lock import locks_out

# What a check writes into --out; a folder holding anything else is not replaced.
OUT_ENTRIES, OUT_MARKS = {"downstream.json", "report.md", "scatter.png", "best_of_k.png"}, {"downstream.json"}


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        default=None,
        help="downstream config (YAML: endpoints, prompts, policy, grader, reward_models, benchmarks; see "
        "docs/downstream.md); default: the embedded demo (SmolLM2-135M as policy and grader, no network)",
    )
    p.add_argument("--out", default=None, help="folder for downstream.json, report.md and the plots "
                   "(default: <workdir>/runs/downstream/<name>/out)")  # fmt: skip
    p.add_argument("--workdir", default=None, help="project folder whose runs/downstream/<name>/ holds the caches")
    p.add_argument(
        "--score-cache",
        default=None,
        metavar="DIR",
        help="RM score cache folder (default: the run folder's score_cache; rmb evaluate's folder shares scores)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the policy, grader and RM calls, texts to score, tokens and cost; call nothing",
    )
    p.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop before the LLM calls of this run would cost more (overrides max_cost); a re-run resumes",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _print_plan(plan: dict) -> None:
    print_plan(f"{plan['n_prompts']} prompts x {plan['n_samples']} samples", plan["estimate"])
    for key, t in plan["texts_to_score"].items():
        print(f"  score {key}: {t['to_score']} texts to score ({t['cached']} cached)")


@locks_out()
def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rmb_build.analysis.downstream.config import load_downstream_config
    from rmb_build.analysis.downstream.outputs import SMALL_GRADER_NOTE, headline, write_outputs
    from rmb_build.analysis.downstream.run import run_downstream
    from rmb_build.core.atomic import atomic_dir, check_out_dir
    from rmb_build.core.errors import RMBError
    from rmb_build.core.paths import workdir

    if args.out:
        check_out_dir(args.out, OUT_ENTRIES, OUT_MARKS)  # before the slow part: fail early
    if args.max_cost is not None and args.max_cost < 0:
        raise RMBError("--max-cost must be at least 0")
    if args.config:
        cfg = load_downstream_config(args.config)
    else:
        from rmb_build.analysis.downstream import demo

        cfg = demo.demo_config()
        print(
            "no --config: running the embedded demo (SmolLM2-135M as policy, grader and generative RM, scored first "
            "on the demo's own small benchmark; minutes on a CPU)"
        )
    run_dir = workdir(args.workdir) / "runs" / "downstream" / cfg.name
    if not args.config:  # the demo scores its own RMs on its own small benchmark first: figures to correlate
        from rmb_build.commands.evaluate import OUT_ENTRIES as EVAL_ENTRIES
        from rmb_build.commands.evaluate import OUT_MARKS as EVAL_MARKS

        score_dir = args.score_cache or run_dir / "score_cache"
        cfg = demo.evaluate_demo_benchmarks(cfg, run_dir, score_dir, EVAL_ENTRIES, EVAL_MARKS, dry_run=args.dry_run,
                                            progress=not args.no_progress)  # fmt: skip
    embedded_grader = cfg.grader.endpoint is not None and cfg.endpoints[cfg.grader.endpoint].embedded is not None
    note = SMALL_GRADER_NOTE if embedded_grader else None
    result = run_downstream(
        cfg,
        run_dir,
        dry_run=args.dry_run,
        max_cost=args.max_cost,
        progress=not args.no_progress,
        score_cache=args.score_cache,
    )
    if args.dry_run:
        _print_plan(result)
        return 0
    out = Path(args.out) if args.out else run_dir / "out"
    with atomic_dir(out, OUT_ENTRIES, OUT_MARKS) as tmp:
        files = {name: out / path.name if path else None for name, path in write_outputs(result, tmp, note).items()}
    for key, r in sorted(result["rms"].items(), key=lambda kv: -kv[1]["score"]):
        ci = r["ci95"]
        print(
            f"{key}: best-of-{result['n_samples']} grade {r['score']:.3f}"
            + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
            + (" (the grader itself)" if r["is_grader"] else "")
        )
    print(f"random pick {result['random']['score']:.3f}, oracle {result['oracle']['score']:.3f}")
    for c in result["correlations"]:
        print(headline(c))
    if result["without_benchmark"]:
        print("without a benchmark folder: " + ", ".join(result["without_benchmark"]))
    sent = sum(c["requests"] for c in result["calls"].values())
    scored = sum(s["scored"] for s in result["scoring"].values())
    print(f"sent {sent} LLM requests, scored {scored} texts (the rest from the caches)")
    if note:
        print(note)
    print(f"wrote {', '.join(str(p) for p in files.values() if p)}")
    return 0
