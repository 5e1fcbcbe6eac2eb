"""``rmb classify-eval RELEASE``: accuracy of the default offline classifier on a labelled release."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "release",
        help="a labelled RMB release: its folder, its Hugging Face form (a folder or Hub id), or rmb (the official release)",
    )
    p.add_argument("--json", metavar="OUT", default=None, help="write the full report (with confusion matrices) here")


def _fmt(x: float | None, width: int) -> str:
    return f"{x:>{width}.3f}" if x is not None else f"{'-':>{width}}"


def run(args: argparse.Namespace) -> int:
    from rmb_build.analysis.classify_eval import evaluate_classifier
    from rmb_build.benchmarks.formats import RMB, open_release
    from rmb_build.core import atomic

    report = evaluate_classifier(open_release(args.release, RMB))
    print(f"{'scenario':<58}{'n':>6}{'abstained':>10}{'scenario':>10}{'task':>8}{'goal':>8}")
    for sid, row in report["per_scenario"].items():
        print(
            f"{sid:<58}{row['n']:>6}{row['abstained']:>10}{_fmt(row['accuracy'], 10)}"
            f"{_fmt(row['task_accuracy'], 8)}{_fmt(row['goal_accuracy'], 8)}"
        )
    print(
        f"{'all distinct conversations (answered)':<58}{report['n']:>6}{report['abstained']:>10}"
        f"{_fmt(report['scenario_accuracy'], 10)}{_fmt(report['task_accuracy'], 8)}{_fmt(report['goal_accuracy'], 8)}"
    )
    print(
        f"{'  counting abstentions as wrong':<74}{_fmt(report['scenario_accuracy_all'], 10)}"
        f"{_fmt(report['task_accuracy_all'], 8)}{_fmt(report['goal_accuracy_all'], 8)}"
    )
    if report["threshold"] is not None:
        print(
            f"abstained below confidence {report['threshold']:.3f} (chosen by cross-validation on the "
            f"classifier's training examples): {report['abstained']} of {report['n']} "
            f"({report['abstention_rate']:.1%}); accuracies above are over the other {report['answered']}"
        )
    if args.json:
        atomic.write_json(args.json, report)
        print(f"report written to {args.json}")
    return 0
