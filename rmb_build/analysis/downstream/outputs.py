"""What ``rmb downstream`` writes: downstream.json, report.md, scatter.png (benchmark figure vs downstream
score) and best_of_k.png (each RM's curve between the random pick and the oracle)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

from rmb_build.core.atomic import write_json, write_text
from rmb_build.core.plot_text import plain_text
from rmb_build.core.redact import redact_json
from rmb_build.evaluate.heatmap import save_png

SMALL_GRADER_NOTE = (
    "The grader here is the embedded SmolLM2-135M: far too small to grade answers (it scores '2+2=4' as 2/10), "
    "so these downstream scores are noise, and with a handful of RMs so is any correlation (its n is shown; "
    "under 3 RMs none is computed). They show the check runs end to end; point policy, grader and RMs at real "
    "endpoints, with many RMs, for a figure that means something."
)


def _fmt(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _ci(ci: Sequence[float] | None) -> str:
    return "no interval" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def headline(corr: Mapping[str, Any]) -> str:
    """``r = 0.87 [0.80, 0.92]`` or ``r = 0.87, permutation p = 0.33``, with the RM count."""
    p = corr["pearson"]
    if p["value"] is None:
        return f"{corr['benchmark_figure']}: no correlation ({corr.get('note', 'undefined')}; n={corr['n_rms']} RMs)"
    tail = f" {_ci(p['ci95'])}" if p.get("ci95") else f", permutation p = {_fmt(p.get('p_value'))}"
    s = corr["spearman"]
    return (
        f"{corr['benchmark_figure']}: Pearson r = {p['value']:.2f}{tail}; Spearman {_fmt(s['value'], 2)}; "
        f"Kendall {_fmt(corr['kendall']['value'], 2)} (n={corr['n_rms']} RMs)"
    )


def primary(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The correlation shown first: the first figure with a value, else the first figure."""
    cs = result.get("correlations") or []
    return next((c for c in cs if c["pearson"]["value"] is not None), cs[0] if cs else None)


def write_report(
    result: Mapping[str, Any], out: Path, note: str | None = None, plots: Mapping[str, Any] | None = None
) -> Path:
    n = result["n_samples"]
    lines = [
        f"# Downstream check: {result['name']}",
        "",
        f"{result['n_prompts']} held-out prompts, {n} policy samples each; each RM picks its best of k samples "
        "(expected grade of the pick computed exactly, ties included). Score = best-of-"
        f"{n} expected grade averaged over prompts, with a bootstrap 95% interval over prompts.",
        "",
    ]
    if note:
        lines += [f"> {note}", ""]
    p = result["prompts"]
    lines += [
        f"Prompts: {p['read']} read, {p['dropped_near_duplicates']} dropped as (near-)duplicates of the "
        f"benchmark ({', '.join(p['holdout_releases']) or 'no benchmark release to check against'}), "
        f"{p['not_drawn']} not drawn, {p['incomplete']} left out for a sample without a grade or a score.",
        "",
        "## Correlation with the benchmark",
        "",
    ]
    for c in result["correlations"]:
        lines.append(f"- {headline(c)}")
    ks = list(result["oracle"]["best_of_k"])
    lines += [
        "",
        "## Reward models",
        "",
        "| RM | downstream score | 95% interval | picks with the best grade | "
        + " | ".join(f"k={k}" for k in ks)
        + " | benchmark |",
        "|---|---|---|---|" + "---|" * len(ks) + "---|",
    ]
    for key, r in sorted(result["rms"].items(), key=lambda kv: -kv[1]["score"]):
        flags = " (the grader itself: left out of correlations)" if r["is_grader"] else ""
        flags += " (shares the grader's model)" if r["shares_grader_model"] else ""
        bench = r["benchmark"] or f"none: {r['benchmark_missing']}"
        curve = " | ".join(_fmt(r["best_of_k"][k]) for k in ks)
        lines.append(
            f"| {key}{flags} | {r['score']:.3f} | {_ci(r['ci95'])} | {100 * r['oracle_agreement']:.0f}% | "
            f"{curve} | {bench} |"
        )
    for label in ("random", "oracle"):
        row = result[label]
        curve = " | ".join(_fmt(row["best_of_k"][k]) for k in ks)
        lines.append(f"| *{label}* | {row['score']:.3f} | {_ci(row.get('ci95'))} | | {curve} | |")
    calls = result.get("calls", {})
    lines += [
        "",
        "## What this run did",
        "",
        "LLM requests sent per stage, re-asks of replies that did not fit the schema included (cached answers reused): "
        + (", ".join(f"{s} {c['requests']} ({c['cached']} cached)" for s, c in calls.items()) or "none")
        + ".",
        "",
        "Texts scored (from the score cache): "
        + ", ".join(
            f"{k} {s['scored']} ({s['cached']} cached"
            + (f", {s['failed']} failed: asked again next run)" if s.get("failed") else ")")
            for k, s in result.get("scoring", {}).items()
        )
        + ".",
        "",
    ]
    drawn = [name for name, path in (plots or {}).items() if path]
    lines += [
        "Plots: "
        + (", ".join(f"`{name}` ({PLOT_TITLES[name]})" for name in drawn) or "none")
        + ("" if "scatter.png" in drawn else " (no scatter: no RM has a benchmark figure)")
        + ".",
        "",
    ]
    path = out / "report.md"
    write_text(path, "\n".join(lines))
    return path


PLOT_TITLES = {"scatter.png": "benchmark figure vs downstream score", "best_of_k.png": "best-of-k curves"}


def plot_label(key: str) -> str:
    """An RM's name on a plot: a ``python:`` or ``scores:`` spec shows its file's name, not its folders
    (downstream.json and report.md keep the whole spec)."""
    kind, sep, rest = key.partition(":")
    if kind in ("python", "scores") and sep and "/" in rest:
        return f"{kind}:{rest.rsplit('/', 1)[1]}"
    return key


LABEL_OFFSETS = (5, -11, 15, -21)  # points above a label's level, in turn: above, below, higher, lower


def _label_levels(xy: list[tuple[float, float]]) -> list[int]:
    """For each point, the first label level no nearby point (half the x range, a tenth of the y range) has
    taken: labels of points that crowd together do not print over each other."""
    xs, ys = [x for x, _ in xy], [y for _, y in xy]
    dx, dy = (max(xs) - min(xs)) / 2 or 1.0, (max(ys) - min(ys)) / 10 or 1.0
    levels: list[int] = []
    for i, (x, y) in enumerate(xy):
        taken = {levels[j] for j, (a, b) in enumerate(xy[:i]) if abs(a - x) < dx and abs(b - y) < dy}
        levels.append(next(level for level in range(len(xy) + 1) if level not in taken))
    return levels


def write_scatter(result: Mapping[str, Any], path: Path, note: str | None = None) -> Path | None:
    """The first correlated figure against the downstream score: labelled points with both intervals, least-squares
    line, r in the title, ``note`` beneath."""
    corr = primary(result)
    if corr is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure = corr["benchmark_figure"]
    points = [
        (key, r["figures"][figure], r["score"], r["is_grader"])
        for key, r in result["rms"].items()
        if r["figures"].get(figure) is not None
    ]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    levels = _label_levels([(x, y) for _, x, y, _ in points])
    for (key, x, y, grader), level in zip(points, levels):
        ci = result["rms"][key].get("ci95")
        xci = (result["rms"][key].get("figure_ci95") or {}).get(figure)
        yerr = [[y - ci[0]], [ci[1] - y]] if ci else None
        xerr = [[x - xci[0]], [xci[1] - x]] if xci else None
        colour = "#999999" if grader else "#1f77b4"
        ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", color=colour, ecolor=colour, elinewidth=0.8, capsize=3,
                    zorder=3, alpha=0.9)  # fmt: skip
        ax.annotate(
            plot_label(key) + (" (grader)" if grader else ""),
            (x, y),
            textcoords="offset points",
            xytext=(5, LABEL_OFFSETS[level % len(LABEL_OFFSETS)]),
            fontsize=7,
            zorder=4,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.7},
        )
    used = [(x, y) for _, x, y, g in points if not g]
    if len(used) >= 2 and len({x for x, _ in used}) > 1:
        xs, ys = np.array(used).T
        slope, icept = np.polyfit(xs, ys, 1)
        grid = np.linspace(xs.min(), xs.max(), 50)
        ax.plot(grid, slope * grid + icept, color="#d62728", linewidth=1, label="least-squares fit")
    for label, colour in (("random", "#2ca02c"), ("oracle", "#ff7f0e")):
        ax.axhline(result[label]["score"], color=colour, linestyle=":", linewidth=1, label=f"{label} pick")
    ax.legend(fontsize=7, loc="best", framealpha=0.8)
    ax.set_xlabel(f"benchmark: {figure}  (bars: 95% intervals over items and over prompts)")
    ax.set_ylabel(f"downstream: expected grade of best-of-{result['n_samples']} pick")
    p = corr["pearson"]
    stat = (
        "no correlation: " + corr.get("note", "undefined")
        if p["value"] is None
        else f"Pearson r = {p['value']:.2f} "
        + (f"{_ci(p['ci95'])}" if p.get("ci95") else f"(permutation p = {_fmt(p.get('p_value'), 2)})")
    )
    ax.set_title(f"{result['name']}: {stat}, n = {corr['n_rms']} RMs", fontsize=9)
    ax.grid(alpha=0.3)
    if note:  # what the figure cannot show: why its correlation means nothing
        fig.text(0.01, -0.02, textwrap.fill(note, 110), fontsize=6.5, va="top", color="#a00000")
    return save_png(fig, path)


def write_curves(result: Mapping[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [int(k) for k in result["oracle"]["best_of_k"]]
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for key, r in sorted(result["rms"].items()):
        ax.plot(ks, [r["best_of_k"][str(k)] for k in ks], marker="o", markersize=3, label=plot_label(key))
    ax.plot(ks, [result["oracle"]["best_of_k"][str(k)] for k in ks], "k--", label="oracle (best grade)")
    ax.plot(ks, [result["random"]["best_of_k"][str(k)] for k in ks], "k:", label="random pick")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("k: samples the RM picks from")
    ax.set_ylabel("expected grade of the pick")
    ax.set_title(f"{result['name']}: best-of-k, {result['n_prompts']} prompts", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def write_outputs(result: Mapping[str, Any], out: str | Path, note: str | None = None) -> dict[str, Path | None]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = redact_json(result)  # its specs are redacted already; so is whatever else a config carried
    write_json(out / "downstream.json", result)
    with plain_text():  # RM specs and the run's name are drawn as given
        plots = {
            "scatter.png": write_scatter(result, out / "scatter.png", note),
            "best_of_k.png": write_curves(result, out / "best_of_k.png"),
        }
    return {"downstream.json": out / "downstream.json", "report.md": write_report(result, out, note, plots), **plots}


def read_downstream(folder: str | Path) -> dict[str, Any]:
    """A downstream folder's downstream.json (RMBError naming the file when it is missing or unreadable)."""
    import json

    from rmb_build.core.errors import RMBError

    path = Path(folder) / "downstream.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RMBError(f"{path}: no such file (expected an 'rmb downstream --out' folder)") from None
    except json.JSONDecodeError as exc:
        raise RMBError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
