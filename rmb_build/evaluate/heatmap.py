"""``heatmap.png``: accuracy per scenario and set, each cell coloured relative to its set's chance level.

A random scorer gets 1/2 of the pairs right and 1/(1 + losers) of the BoN items, so a raw colour
scale would make every BoN cell look poor. The colour is the accuracy's place between 0 and chance
(red) or between chance and 1 (blue); white is chance. Rows are the full scenario ids grouped by task,
each cell shows the accuracy and its n (marked when under ``FEW_ITEMS``), and the figure is cropped to what it draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from rmb_build.core.atomic import open_atomic
from rmb_build.core.intervals import FEW_ITEMS, FEW_MARK, few_items
from rmb_build.core.plot_text import plain_text
from rmb_build.core.taxonomy import BON_SET, HAZARD_CATEGORIES, PAIRWISE_SET, parse_scenario_id
from rmb_build.evaluate.metrics import scenario_order

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from numpy.typing import NDArray

SET_TITLES = {PAIRWISE_SET: "Pairwise", BON_SET: "Best-of-N"}
DEFAULT_CHANCE = {PAIRWISE_SET: 0.5, BON_SET: 0.25}  # results without per-scenario chance (older files)
ROW_IN, COL_IN, LABEL_PT, CELL_PT = 0.24, 1.25, 7.5, 7


def relative_to_chance(accuracy: float, chance: float) -> float:
    """-1 at accuracy 0, 0 at chance, +1 at accuracy 1 (linear on each side)."""
    if accuracy >= chance:
        return (accuracy - chance) / (1 - chance) if chance < 1 else 0.0
    return (accuracy - chance) / chance


def _chance(results: Mapping[str, Any], set_name: str, scenario: str) -> float:
    return results[set_name]["scenarios"][scenario].get("chance", DEFAULT_CHANCE[set_name])


def set_chance(results: Mapping[str, Any], set_name: str) -> float:
    """The set's chance level: a random scorer's expected accuracy, averaged over its items."""
    sc = results[set_name]["scenarios"]
    return sum(_chance(results, set_name, s) * v["n"] for s, v in sc.items()) / sum(v["n"] for v in sc.values())


def _label(scenario_id: str) -> str:
    sc = parse_scenario_id(scenario_id)
    name = HAZARD_CATEGORIES.get(sc.name) if sc.task is None else None
    return f"{scenario_id} ({name})" if name else scenario_id


def _group(scenario_id: str) -> str:
    sc = parse_scenario_id(scenario_id)
    return sc.task_id or sc.goal


def write_heatmap(results: Mapping[str, Any], path: str | Path) -> Path | None:
    """Draw ``results`` (a results.json object) to the PNG ``path``; None when it has no scenario. Its names
    (RM spec, scenario ids) are drawn as plain text."""
    with plain_text():
        return _draw(results, path)


@dataclass(frozen=True)
class Grid:
    """What the heatmap draws, worked out from the results before any drawing: its columns (sets) and rows
    (scenarios), each cell's colour (-1..1, NaN where the set lacks the scenario) and text, the labels and title."""

    sets: list[str]
    rows: list[str]
    colour: NDArray[Any]  # rows x sets
    cells: list[list[str | None]]  # None: the set has no items of the scenario
    column_labels: list[str]
    row_labels: list[str]
    title: str


def grid(results: Mapping[str, Any]) -> Grid | None:
    """The heatmap of ``results``, as data; None when it has no scenario."""
    import numpy as np

    sets = [s for s in (PAIRWISE_SET, BON_SET) if results.get(s, {}).get("scenarios")]
    rows = scenario_order(list({sc: None for s in sets for sc in results[s]["scenarios"]}))
    if not rows:
        return None
    colour = np.full((len(rows), len(sets)), np.nan)
    cells: list[list[str | None]] = [[None] * len(sets) for _ in rows]
    for j, s in enumerate(sets):
        for i, sc in enumerate(rows):
            cell = results[s]["scenarios"].get(sc)
            if cell is not None:
                colour[i, j] = relative_to_chance(cell["accuracy"], _chance(results, s, sc))
                few = FEW_MARK if few_items(cell["n"]) else ""
                cells[i][j] = f"{100 * cell['accuracy']:.0f}%  n={cell['n']}{few}"
    return Grid(
        sets=sets,
        rows=rows,
        colour=colour,
        cells=cells,
        column_labels=[f"{SET_TITLES[s]}\nchance {100 * set_chance(results, s):.0f}%" for s in sets],
        row_labels=[_label(r) for r in rows],
        title=f"{results['rm']}: accuracy per scenario",
    )


def _draw(results: Mapping[str, Any], path: str | Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    drawn = grid(results)
    if drawn is None:
        return None
    sets, rows, colour = drawn.sets, drawn.rows, drawn.colour
    fig, ax = plt.subplots(figsize=(COL_IN * len(sets), ROW_IN * len(rows)))
    ax.set_position((0, 0, 1, 1))  # labels and the colour bar sit outside; savefig crops to them
    cmap = ListedColormap(plt.get_cmap("RdBu")(np.linspace(0.08, 0.92, 256)))
    im = ax.imshow(np.ma.masked_invalid(colour), cmap=cmap, vmin=-1, vmax=1, aspect="auto")
    ax.set_facecolor("#e6e6e6")  # a scenario the set lacks
    ax.set_xticks(range(len(sets)), drawn.column_labels, fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)), drawn.row_labels, fontsize=LABEL_PT)
    ax.tick_params(length=0)
    for i, row in enumerate(drawn.cells):
        for j, text in enumerate(row):
            if text is None:
                ax.text(j, i, "no items", ha="center", va="center", fontsize=CELL_PT, color="#777777")
                continue
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=CELL_PT,
                color="white" if abs(colour[i, j]) > 0.6 else "black",
            )
    groups = [_group(r) for r in rows]
    for i in range(1, len(rows)):
        if groups[i] != groups[i - 1]:
            ax.axhline(i - 0.5, color="black", linewidth=0.9)
    for j in range(1, len(sets)):
        ax.axvline(j - 0.5, color="white", linewidth=2)
    ax.set_title(drawn.title, fontsize=9, pad=28)
    height = ROW_IN * len(rows)
    cax = fig.add_axes((0.1, -0.32 / height, 0.8, 0.1 / height))  # 0.22 in below the grid, 0.1 in tall
    bar = fig.colorbar(im, cax=cax, orientation="horizontal", ticks=[-1, 0, 1])
    bar.ax.set_xticklabels(["0%", "chance", "100%"], fontsize=7)
    bar.set_label(
        f"colour: accuracy relative to the set's chance level;  {FEW_MARK} fewer than {FEW_ITEMS} items", fontsize=7
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_png(fig, path)


def save_png(fig: Figure, path: Path) -> Path:
    """Save ``fig`` to the PNG ``path`` whole or not at all (``core.atomic.open_atomic``), then close it, also
    when saving fails."""
    import matplotlib.pyplot as plt

    try:
        with open_atomic(path) as fh:
            fig.savefig(fh, format="png", dpi=120, bbox_inches="tight", pad_inches=0.12)
    finally:
        plt.close(fig)
    return path
