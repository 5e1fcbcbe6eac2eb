"""report.md (tables a person reads) and heatmap.png, from a results.json object.

Every accuracy is labelled macro (mean of scenario accuracies) or micro (mean over items)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rmb_build.core.atomic import write_text
from rmb_build.core.intervals import FEW_MARK, few_items
from rmb_build.core.intervals import FEW_NOTE as INTERVALS_FEW_NOTE
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.evaluate.coverage import partial_note
from rmb_build.evaluate.heatmap import SET_TITLES, write_heatmap
from rmb_build.evaluate.protocols import label as protocol_label
from rmb_build.evaluate.report_style import length_control_section, style_section
from rmb_build.release.audit import defects_phrase


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float]) -> str:
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _n(n: int) -> str:
    """An item count, marked when the figure beside it rests on few items."""
    return f"{n} {FEW_MARK}" if few_items(n) else str(n)


def _pooled_ci(ci: list[float], few_item_scenarios: int) -> str:
    """A macro's interval, marked when it pools scenarios of few items (conservative there)."""
    return f"{_ci(ci)} {FEW_MARK}" if few_item_scenarios else _ci(ci)


FEW_NOTE = f"{INTERVALS_FEW_NOTE} (it held the truth in 97-100% of simulated draws, docs/calibration.md)."


def _group_table(title: str, groups: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = [f"| {title} | macro | 95% CI | micro | 95% CI | n |", "| --- | ---: | --- | ---: | --- | ---: |"]
    for name, g in groups.items():
        lines.append(
            f"| {name} | {_pct(g['macro'])} | {_pooled_ci(g['ci95_macro'], g.get('few_item_scenarios', 0))} | "
            f"{_pct(g['micro'])} | "
            f"{_ci(g['ci95_micro'])} | {_n(g['n'])} |"
        )
    return lines


def _scoring_notes(scoring: Mapping[str, Any]) -> list[str]:
    """What the scoring table's counts leave out: system-first items and how far batching moved scores."""
    out = []
    if scoring.get("system_first"):
        out.append(f"{scoring['system_first']} item(s) open with a system turn: {scoring['system_first_handling']}.")
    check = scoring.get("batch_check")
    if check and check.get("rescored"):
        out.append(
            f"Batch check: {check['rescored']} texts scored in batches of {check['batch_size']} ({check['dtype']}, "
            f"{check['device']}) and again alone differ in {check['differ']}, by at most {check['max_abs_diff']:.3g}."
        )
    return out + [""] if out else []


def render_markdown(results: Mapping[str, Any], heatmap: str | None = None) -> str:
    """The report as Markdown: summary, bias breakdowns, then per goal, task and scenario."""
    out = [
        f"# Evaluation of `{results['rm']}`",
        "",
        f"Release: `{results['release']}`. Ties: `{results['ties']}`. 95% intervals: {_method(results)}. "
        f"Accuracies in %. {FEW_NOTE}",
        "",
    ]
    if results.get("protocol"):  # which harness's text preparation every figure below was measured under
        out[-1:-1] = [f"Harness {protocol_label(results['protocol'])}: {results['protocol']['harness']}."]
        if results["protocol"].get("batch_dependence"):
            out[-1:-1] = [f"Batches: {results['protocol']['batch_dependence']}."]
    if partial_note(results):
        out[-1:-1] = [f"**{partial_note(results).capitalize()}** of the release: no figure below is the release's."]
    sets = [s for s in (PAIRWISE_SET, BON_SET) if results.get(s, {}).get("scenarios")]
    out += _rmb_overall_section(results.get("rmb_overall"))
    out += _defects_section(results)
    out += _scores_file_section(results.get("scores_file"))
    out += [
        "## Summary",
        "",
        "macro = mean of scenario accuracies; micro = mean over items.",
        "",
        "| set | overall macro | overall micro | Helpfulness macro | Harmlessness macro | n |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in sets:
        r = results[s]

        def goal(g: str, r: dict = r) -> str:
            return _pct(r["goals"][g]["macro"]) if g in r["goals"] else "–"

        out.append(
            f"| {SET_TITLES[s]} | {_pct(r['overall']['macro'])} | {_pct(r['overall']['micro'])} | "
            f"{goal('Helpfulness')} | {goal('Harmlessness')} | {_n(r['overall']['n'])} |"
        )
    out.append("")
    if heatmap:
        out += [f"![per-scenario accuracy]({heatmap})", ""]
    out += _bias_section(results)
    out += length_control_section(results.get("length_control"))
    out += style_section(results.get("style"))
    scoring = results.get("scoring")
    if scoring:
        out += ["## Scoring", "", "| | count |", "| --- | ---: |"]
        out += [f"| {k.replace('_', ' ')} | {v} |" for k, v in scoring.items() if isinstance(v, (int, float))]
        out.append("")
        out += _scoring_notes(scoring)
    for s in sets:
        r = results[s]
        out += [f"## {SET_TITLES[s]} set", ""]
        out += _group_table("goal", r["goals"]) + [""]
        if r["tasks"]:
            out += _group_table("task", r["tasks"]) + [""]
        out += ["| scenario | accuracy | 95% CI | n |", "| --- | ---: | --- | ---: |"]
        out += [
            f"| {name} | {_pct(v['accuracy'])} | {_ci(v['ci95'])} | {_n(v['n'])} |"
            for name, v in r["scenarios"].items()
        ]
        out.append("")
    return "\n".join(out)


def _method(results: Mapping[str, Any]) -> str:
    intervals = results.get("intervals")
    if intervals:
        return f"{intervals['method']}, {intervals['draws']} draws (seed {intervals['seed']})"
    return (
        f"seeded bootstrap, {results['bootstrap']['resamples']} resamples (seed {results['bootstrap']['seed']}): "
        "results written before Clopper-Pearson intervals, which may be of zero width"
    )


def _rmb_overall_section(overall: Mapping[str, Any] | None) -> list[str]:
    """RMB's headline: the four cells (each a set's goal macro) and their mean, as RMB's leaderboard ranks."""
    if not overall or overall.get("mean") is None:
        return []
    out = [
        "## RMB overall",
        "",
        "RMB's headline figure: the mean of four cells, each the macro accuracy (mean of scenario accuracies) "
        "of one goal in one set.",
        "",
        "| cell | macro | 95% CI | n |",
        "| --- | ---: | --- | ---: |",
    ]
    small = overall.get("few_item_scenarios") or {}
    for cell, value in overall["cells"].items():
        ci = overall["ci95"].get(cell)
        shown = _pooled_ci(ci, small.get(cell, 0)) if ci else "–"
        out.append(f"| {cell} | {_pct(value)} | {shown} | {_n(overall['n'][cell])} |")
    out.append(
        f"| **mean** | **{_pct(overall['mean'])}** | {_pooled_ci(overall['ci95']['mean'], small.get('mean', 0))} | |"
    )
    if overall.get("missing"):
        out += [
            "",
            f"No items for {', '.join(overall['missing'])}: the mean is over the other cells, so it is not "
            "comparable with RMB's published figures.",
        ]
    return out + [""]


def _defects_section(results: Mapping[str, Any]) -> list[str]:
    """Counts of the release's audit defects, and whether the defective items were scored."""
    defects = results.get("release_defects") or {}
    counts = {k: v for k, v in (defects.get("counts") or {}).items() if v}
    if not counts:
        return []
    skipped = results.get("skipped_defective")
    out = [
        "## Release defects",
        "",
        "`rmb audit` finds these defects in the release (near-duplicate prompts: only equal ones checked here).",
        "",
        "| kind | count |",
        "| --- | ---: |",
    ]
    out += [f"| {k.replace('_', ' ')} | {v} |" for k, v in counts.items()]
    out.append("")
    if skipped:
        total = sum(defects.get("counts", {}).values())
        out.append(
            f"The items of these {defects_phrase(total, skipped['n'])} were left out of scoring (`--skip-defective`)."
        )
    else:
        total = sum(defects.get("counts", {}).values())
        out.append(
            f"The items of these {defects_phrase(total, defects.get('items', 0))} were scored as they are; "
            "`--skip-defective` leaves them out."
        )
        if counts.get("identical_pair"):
            out.append(
                f"A reward model that scores each text gives both answers of the {counts['identical_pair']} "
                "identical-text pairs the same score, so each counts as "
                f"{'half a win' if results.get('ties') == 'half' else 'a loss'}."
            )
        if counts.get("unwinnable_bon"):
            out.append(
                f"The {counts['unwinnable_bon']} BoN items whose best answer equals a loser count as a "
                "loss for every reward model."
            )
    return out + [""]


def _scores_file_section(listing: Mapping[str, Any] | None) -> list[str]:
    """Where the scores came from (``--scores``) and which items they did not cover."""
    if not listing:
        return []
    left = listing["missing_in_file"]["count"] + listing["mismatched"]["count"]
    out = [
        "## Scores file",
        "",
        f"Scores read from `{listing['path']}` ({listing['format']}, sha256 `{listing['sha256'][:12]}`), not "
        f"computed here: {listing['matched']} items matched by (set, uid).",
        "",
        "| rows | count |",
        "| --- | ---: |",
    ]
    for key, label in (
        ("missing_in_file", "release items missing from the file"),
        ("mismatched", "rows whose category_path or losers differ from their item"),
        ("not_in_release", "rows for no item of the release"),
        ("repeated", "repeated rows"),
        ("is_correct_disagrees", "rows whose is_correct disagrees with their rewards"),
    ):
        out.append(f"| {label} | {listing[key]['count']} |")
    if listing.get("outcome_only"):
        out.append(f"| outcome only (is_correct) | {listing['outcome_only']} |")
    out.append("")
    if left:
        out.append(
            f"The {left} release items without usable scores (missing from the file, or whose category_path "
            "or number of losers differs) are **left out of every figure**, not counted as losses: the "
            "figures cover the matched items only. results.json `scores_file` names them."
        )
        out.append("")
    return out


def _bias_section(results: Mapping[str, Any]) -> list[str]:
    bias = results.get("bias") or {}
    out: list[str] = []
    length = bias.get("length")
    if length:
        out += [
            "## Length bias (pairwise)",
            "",
            "Accuracy on pairs where the chosen answer is shorter, longer, or as long as the rejected one. "
            "A model that prefers longer answers scores high on `chosen longer` and low on `chosen shorter`.",
            "",
            "| pairs | accuracy | n |",
            "| --- | ---: | ---: |",
        ]
        out += [f"| {k.replace('_', ' ')} | {_pct(v['accuracy'])} | {v['n']} |" for k, v in length.items()]
        out.append("")
    pos = bias.get("position")
    if pos:
        out += [
            "## Position bias (generative RM)",
            "",
            "Each pair was judged in both orders. A verdict *follows the position* when the judge picked "
            "the same slot both times, whatever the answers.",
            "",
            f"- position-following rate: {_pct(pos['position_following_rate'])}% of {pos['n_order_pairs']} order pairs",
            f"- first-position rate: {_pct(pos['first_position_rate'])}% of {pos['n_verdicts']} verdicts",
            "",
        ]
    return out


def write_report(results: Mapping[str, Any], out_dir: str | Path) -> Path:
    """Write ``heatmap.png`` and ``report.md`` into ``out_dir``; returns the report's path."""
    out_dir = Path(out_dir)
    drew = write_heatmap(results, out_dir / "heatmap.png")
    report = out_dir / "report.md"
    write_text(report, render_markdown(results, drew.name if drew else None) + "\n")
    return report
