"""A small release for the review tests, and independent computations of the review's figures."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from pathlib import Path

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
PAIRWISE_CELLS = ("Helpfulness/Chat/Discussion", "Helpfulness/Code/Documentation", "Harmlessness/S6")
BON_CELLS = ("Helpfulness/Chat/Discussion", "Harmlessness/S1")


def small_release(root: Path, per_cell: int = 4) -> Path:
    """Pairwise and BoN items in both goals; pairwise uid 0 holds HTML and script in its answer."""
    rel = Release(name="review-small", root=None)
    uid = 0
    for scenario in PAIRWISE_CELLS:
        for _ in range(per_cell):
            conv = (Turn("user", f"Question {uid} about {scenario}?", "en"),)
            if uid == 0:
                conv = (
                    Turn("user", "Show me **bold** and code:\n\n```python\nprint(1 < 2)\n```", "en"),
                    Turn("assistant", "Sure.", "en"),
                    Turn("user", "And some HTML?", "en"),
                )
            chosen = f"Chosen answer {uid}." if uid else f"Here it is: {HOSTILE}"
            rel.add(
                PairwiseItem(str(uid), conv, Answer("model-a", chosen), Answer("model-b", f"Rejected {uid}."), scenario)
            )
            uid += 1
    uid = 0
    for scenario in BON_CELLS:
        for _ in range(per_cell):
            conv = (Turn("user", f"Best-of-N question {uid} in {scenario}?", "en"),)
            losers = (Answer("model-b", f"Loser zero {uid}."), Answer("model-c", f"Loser one {uid}."))
            rel.add(BonItem(str(uid), conv, Answer("model-a", f"Best answer {uid}."), losers, scenario))
            uid += 1
    write_release(rel, root)
    return root


def alpha_by_pairs(units: list[list[str]]) -> float | None:
    """Krippendorff's alpha (nominal) the long way: every ordered pair of values within a unit, weighted
    1/(m-1), into a coincidence matrix; then 1 - (n-1) * disagreeing / sum over c != k of n_c n_k."""
    cells: Counter = Counter()
    for unit in units:
        m = len(unit)
        if m < 2:
            continue
        for i in range(m):
            for j in range(m):
                if i != j:
                    cells[(unit[i], unit[j])] += 1 / (m - 1)
    values = sorted({c for c, _ in cells})
    n_c = {c: sum(cells[(c, k)] for k in values) for c in values}
    n = sum(n_c.values())
    disagree = sum(cells[(c, k)] for c in values for k in values if c != k)
    chance = sum(n_c[c] * n_c[k] for c in values for k in values if c != k)
    return None if chance == 0 else 1 - (n - 1) * disagree / chance


def kappa_by_table(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa from the two people's contingency table."""
    values = sorted({v for p in pairs for v in p})
    n = len(pairs)
    agree = sum(1 for a, b in pairs if a == b) / n
    chance = sum(sum(a == v for a, _ in pairs) * sum(b == v for _, b in pairs) for v in values) / n**2
    return None if chance == 1 else (agree - chance) / (1 - chance)


def pairs_of(units: list[list[str]]):
    return [p for u in units for p in combinations(u, 2)]


def table(chars: int) -> str:
    """A Markdown table of about ``chars`` characters; its last row says LAST-ROW."""
    head = "| row | name | value |\n| --- | --- | --- |\n"
    rows = [f"| {i} | cell {i} | {i * 7} |\n" for i in range(chars // 24)]
    return head + "".join(rows) + "| LAST-ROW | end | 0 |\n"


def long_release(root: Path, long_text: str) -> Path:
    """Two pairwise items: uid 0 answers with ``long_text``, uid 1 is short."""
    rel = Release(name="review-long", root=None)
    for uid, text in (("0", long_text), ("1", "A short answer.")):
        conv = (Turn("user", f"Question {uid}?", "en"),)
        rel.add(PairwiseItem(uid, conv, Answer("model-a", text), Answer("model-b", "No."), PAIRWISE_CELLS[0]))
    write_release(rel, root)
    return root
