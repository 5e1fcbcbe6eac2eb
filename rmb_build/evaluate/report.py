"""report.md (tables a person reads) and a per-scenario accuracy heatmap, from a results.json object."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..atomic import write_text
from ..taxonomy import BON_SET, PAIRWISE_SET

SET_TITLES = {PAIRWISE_SET: "Pairwise", BON_SET: "Best-of-N"}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float]) -> str:
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _group_table(title: str, groups: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = [f"| {title} | macro | 95% CI | micro | 95% CI | n |", "| --- | ---: | --- | ---: | --- | ---: |"]
    for name, g in groups.items():
        lines.append(f"| {name} | {_pct(g['macro'])} | {_ci(g['ci95_macro'])} | {_pct(g['micro'])} | "
                     f"{_ci(g['ci95_micro'])} | {g['n']} |")
    return lines


def render_markdown(results: Mapping[str, Any], heatmap: str | None = None) -> str:
    """The report as Markdown: summary, bias breakdowns, then per goal, task and scenario."""
    out = [f"# Evaluation of `{results['rm']}`", "",
           f"Release: `{results['release']}`. Ties: `{results['ties']}`. 95% intervals: seeded bootstrap, "
           f"{results['bootstrap']['resamples']} resamples (seed {results['bootstrap']['seed']}). "
           "Accuracies in %.", ""]
    sets = [s for s in (PAIRWISE_SET, BON_SET) if results.get(s, {}).get("scenarios")]
    out += ["## Summary", "", "| set | overall macro | overall micro | Helpfulness | Harmlessness | n |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in sets:
        r = results[s]
        goal = lambda g: _pct(r["goals"][g]["macro"]) if g in r["goals"] else "–"  # noqa: E731
        out.append(f"| {SET_TITLES[s]} | {_pct(r['overall']['macro'])} | {_pct(r['overall']['micro'])} | "
                   f"{goal('Helpfulness')} | {goal('Harmlessness')} | {r['overall']['n']} |")
    out.append("")
    if heatmap:
        out += [f"![per-scenario accuracy]({heatmap})", ""]
    out += _bias_section(results)
    scoring = results.get("scoring")
    if scoring:
        out += ["## Scoring", "", "| | count |", "| --- | ---: |"]
        out += [f"| {k.replace('_', ' ')} | {v} |" for k, v in scoring.items() if isinstance(v, (int, float))]
        out.append("")
    for s in sets:
        r = results[s]
        out += [f"## {SET_TITLES[s]} set", ""]
        out += _group_table("goal", r["goals"]) + [""]
        if r["tasks"]:
            out += _group_table("task", r["tasks"]) + [""]
        out += ["| scenario | accuracy | 95% CI | n |", "| --- | ---: | --- | ---: |"]
        out += [f"| {name} | {_pct(v['accuracy'])} | {_ci(v['ci95'])} | {v['n']} |"
                for name, v in r["scenarios"].items()]
        out.append("")
    return "\n".join(out)


def _bias_section(results: Mapping[str, Any]) -> list[str]:
    bias = results.get("bias") or {}
    out: list[str] = []
    length = bias.get("length")
    if length:
        out += ["## Length bias (pairwise)", "",
                "Accuracy on pairs where the chosen answer is shorter, longer, or as long as the rejected one. "
                "A model that prefers longer answers scores high on `chosen longer` and low on `chosen shorter`.", "",
                "| pairs | accuracy | n |", "| --- | ---: | ---: |"]
        out += [f"| {k.replace('_', ' ')} | {_pct(v['accuracy'])} | {v['n']} |" for k, v in length.items()]
        out.append("")
    pos = bias.get("position")
    if pos:
        out += ["## Position bias (generative RM)", "",
                "Each pair was judged in both orders. A verdict *follows the position* when the judge picked "
                "the same slot both times, whatever the answers.", "",
                f"- position-following rate: {_pct(pos['position_following_rate'])}% of "
                f"{pos['n_order_pairs']} order pairs",
                f"- first-position rate: {_pct(pos['first_position_rate'])}% of {pos['n_verdicts']} verdicts", ""]
    return out


def write_heatmap(results: Mapping[str, Any], path: str | Path) -> bool:
    """A PNG heatmap: one row per scenario, one column per set. False when there is nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sets = [s for s in (PAIRWISE_SET, BON_SET) if results.get(s, {}).get("scenarios")]
    rows: list[str] = []
    for s in sets:
        rows += [sc for sc in results[s]["scenarios"] if sc not in rows]
    if not rows:
        return False
    grid = np.full((len(rows), len(sets)), np.nan)
    for j, s in enumerate(sets):
        for i, sc in enumerate(rows):
            if sc in results[s]["scenarios"]:
                grid[i, j] = results[s]["scenarios"][sc]["accuracy"]
    labels = [r.removeprefix("Helpfulness/") for r in rows]
    label_in = 0.055 * max(len(x) for x in labels)  # fixed margins: tight_layout re-measures every label
    width, height = label_in + 1.0 + 1.2 * len(sets), 1.0 + 0.2 * len(rows)
    fig, ax = plt.subplots(figsize=(width, height))
    fig.subplots_adjust(left=(label_in + 0.1) / width, right=1 - 1.0 / width, top=1 - 0.45 / height,
                        bottom=0.35 / height)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(sets)), [SET_TITLES[s] for s in sets])
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    for i in range(len(rows)):
        for j in range(len(sets)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{100 * grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] < 0.6 else "black")
    ax.set_title(f"{results['rm']}: accuracy per scenario", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.08, pad=0.04)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return True


def write_report(results: Mapping[str, Any], out_dir: str | Path) -> Path:
    """Write ``heatmap.png`` and ``report.md`` into ``out_dir``; returns the report's path."""
    out_dir = Path(out_dir)
    drew = write_heatmap(results, out_dir / "heatmap.png")
    report = out_dir / "report.md"
    write_text(report, render_markdown(results, "heatmap.png" if drew else None) + "\n")
    return report
