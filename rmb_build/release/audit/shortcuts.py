"""Shortcut audit (``rmb audit --shortcuts``): per set and scenario (a benchmark's subset), how often a trivial
scorer that never reads the answer's substance picks the labelled-better answer, against chance.

The scorers, each a number per answer text: ``longer`` (characters), ``shorter`` (minus characters),
``markdown`` (Markdown marks: headings, list items, emphasis, code fences, table rows), ``list_items``
(lines that open a bulleted or numbered item), ``prompt_overlap`` (the share of the prompt's distinct
words the answer repeats) and ``refusal`` (1 when the answer opens like a refusal, else 0).

A scorer *decides* an item when one answer has its highest score alone; it *wins* when that answer is the
labelled-better one (chosen, or BoN's best). Under the null hypothesis that the label is independent of what
the scorer reads, the better answer is any of the item's N answers with equal chance, so a decided item is a
win with probability 1/N (1/2 for a pair, 1/(1 + losers) for best-of-N): the wins of a subset's decided
items are a sum of independent Bernoullis, and ``p`` is the exact one-sided probability of at least that
many wins (binomial when every item has the same N; the exact Poisson-binomial sum otherwise). Undecided
items (ties) are left out and counted. Every (set, subset, scorer) cell is one test; ``p_adjusted`` is
Holm's step-down correction over all of them (the family-wise error rate), and a cell is ``flagged`` when
its adjusted p is below ``ALPHA`` (0.01) and its accuracy is above chance.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from rmb_build.core.items import Item

ALPHA = 0.01
CORRECTION = "holm"
_WORD = re.compile(r"\w+", re.UNICODE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+", re.MULTILINE)
_MARKDOWN = re.compile(
    r"^\s{0,3}#{1,6}\s|^\s*(?:[-*+]|\d+[.)])\s+|\*\*[^*\n]+\*\*|__[^_\n]+__|^```|^\s*\|.*\|\s*$", re.MULTILINE
)
_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|i can(?:'|no)t|i cannot|i won'?t|i will not|i'?m unable|"
    r"i am unable|i'?m not able|i am not able|as an ai|unfortunately,? i)",
    re.IGNORECASE,
)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _overlap(prompt: str, answer: str) -> float:
    asked = _words(prompt)
    return len(asked & _words(answer)) / len(asked) if asked else 0.0


# name -> (what it says, score(prompt, answer)); a higher score is the scorer's pick.
SCORERS: dict[str, tuple[str, Callable[[str, str], float]]] = {
    "longer": ("the longer answer wins (characters)", lambda p, a: float(len(a))),
    "shorter": ("the shorter answer wins (characters)", lambda p, a: -float(len(a))),
    "markdown": ("more Markdown marks win", lambda p, a: float(len(_MARKDOWN.findall(a)))),
    "list_items": ("more list items win", lambda p, a: float(len(_LIST_ITEM.findall(a)))),
    "prompt_overlap": ("more of the prompt's words repeated wins", _overlap),
    "refusal": ("the answer that opens like a refusal wins", lambda p, a: float(bool(_REFUSAL.search(a)))),
}


def _prompt(item: Item) -> str:
    return "\n".join(t.content for t in item.conversation if t.role == "user")


def _decision(scores: Sequence[float]) -> bool | None:
    """Whether the first (labelled-better) answer is the one top; None when the top is shared."""
    top = max(scores)
    if sum(s == top for s in scores) > 1:
        return None
    return scores[0] == top


def at_least(wins: int, chances: Sequence[float]) -> float:
    """P(a sum of independent Bernoulli(chances) >= wins), exactly."""
    if wins <= 0:
        return 1.0
    if wins > len(chances):
        return 0.0
    if len(set(chances)) == 1:
        from scipy.stats import binom

        return float(binom.sf(wins - 1, len(chances), chances[0]))
    dist = np.zeros(len(chances) + 1)
    dist[0] = 1.0
    for k, p in enumerate(chances, start=1):
        dist[1 : k + 1] = dist[1 : k + 1] * (1 - p) + dist[:k] * p
        dist[0] *= 1 - p
    return float(min(1.0, dist[wins:].sum()))


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adjusted = [0.0] * len(ps)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


class ShortcutTally:
    """The trivial scorers' wins per (set, subset, scorer), one item at a time (a built release is audited as
    its files are read back, without holding its items): ``table()`` is ``shortcut_table``'s result."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(
            lambda: {"items": 0, "wins": 0, "chances": []}
        )

    def add(self, item: Item) -> None:
        prompt, texts = _prompt(item), [a.answer for a in item.answers()]
        for name, (_, score) in SCORERS.items():
            cell = self.cells[(item.set_name, item.scenario_id, name)]
            cell["items"] += 1
            won = _decision([score(prompt, t) for t in texts])
            if won is not None:
                cell["chances"].append(1 / len(texts))
                cell["wins"] += int(won)

    def table(self) -> dict[str, Any]:
        return _table(self.cells)


def shortcut_table(items: Iterable[Item]) -> dict[str, Any]:
    """The audit JSON's ``shortcuts``: ``rows`` (one per set, subset and scorer), the method and the
    flagged count (see the module docstring)."""
    tally = ShortcutTally()
    for item in items:
        tally.add(item)
    return tally.table()


def _table(cells: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for (set_name, subset, scorer), cell in sorted(cells.items()):
        decided, chances = len(cell["chances"]), cell["chances"]
        chance = float(np.mean(chances)) if chances else None
        rows.append(
            {
                "set": set_name,
                "subset": subset,
                "scorer": scorer,
                "items": cell["items"],
                "decided": decided,
                "wins": cell["wins"],
                "accuracy": cell["wins"] / decided if decided else None,
                "chance": chance,
                "p": at_least(cell["wins"], chances),
            }
        )
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_adjusted"] = adjusted
        row["flagged"] = bool(adjusted < ALPHA and row["decided"] and row["accuracy"] > row["chance"])
    return {
        "alpha": ALPHA,
        "correction": CORRECTION,
        "tests": len(rows),
        "flagged": sum(r["flagged"] for r in rows),
        "scorers": {name: said for name, (said, _) in SCORERS.items()},
        "method": "exact one-sided binomial (Poisson-binomial where N varies) over decided items, chance 1/N; "
        "Holm's correction over every (set, subset, scorer) cell",
        "rows": rows,
    }


def format_shortcuts(table: dict[str, Any]) -> str:
    """The printed table: one line per cell, flagged ones marked."""
    lines = [
        f"shortcuts: {table['flagged']} of {table['tests']} (set, subset, scorer) cells beat chance at "
        f"p < {table['alpha']} after {table['correction'].title()}'s correction"
    ]
    if not table["rows"]:
        return lines[0]
    width = max(len(r["subset"]) for r in table["rows"])
    lines.append(
        f"  {'set':<8}  {'subset':<{width}}  {'scorer':<14}  {'acc':>6}  {'chance':>6}  {'decided':>9}  p_holm"
    )
    for r in table["rows"]:
        acc = "-" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}"
        chance = "-" if r["chance"] is None else f"{100 * r['chance']:.1f}"
        mark = "  FLAG" if r["flagged"] else ""
        lines.append(
            f"  {r['set']:<8}  {r['subset']:<{width}}  {r['scorer']:<14}  {acc:>6}  {chance:>6}  "
            f"{r['decided']:>4}/{r['items']:<4}  {r['p_adjusted']:.2g}{mark}"
        )
    return "\n".join(lines)


__all__ = ["ALPHA", "CORRECTION", "SCORERS", "ShortcutTally", "at_least", "format_shortcuts", "holm", "shortcut_table"]
