"""The gold check's section of a manifest (``rmb_build.stages.gold``), told in words: the per-goal
agreement table, the guard's prompt-level precision and whether the judge beats chance. For the
dataset card and ``rmb judge-check``."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from rmb_build.core.intervals import FEW_MARK, few_count_note, few_items

CHANCE = 0.5
NOT_FOUND = "gold release not found"


def table(section: Mapping[str, Any]) -> str:
    """The per-goal agreement as a Markdown table (for ``rmb judge-check`` and the dataset card)."""
    if section.get("status") == NOT_FOUND:
        return f"No gold agreement measured: {NOT_FOUND} ({section.get('release')})."
    rows = ["| goal | agreement | judged | 95% CI | ties | unjudged |", "| --- | --- | --- | --- | --- | --- |"]
    entries = [
        *section.get("agreement", {}).items(),
        (
            "overall",
            {
                **section.get("overall", {}),
                "unjudged": sum(a.get("unjudged", 0) for a in section.get("agreement", {}).values()),
            },
        ),
    ]
    for goal, a in entries:
        if not a.get("n"):
            rows.append(f"| {goal} | - | 0 | - | - | {a.get('unjudged', 0)} |")
            continue
        lo, hi = a["ci95"]
        n = f"{a['n']} {FEW_MARK}" if few_items(a["n"]) else a["n"]
        rows.append(f"| {goal} | {a['value']:.3f} | {n} | {lo:.3f}-{hi:.3f} | {a['ties']} | {a.get('unjudged', 0)} |")
    if any(few_items(a.get("n", 0)) for _, a in entries):
        rows += ["", f"{FEW_MARK} {few_count_note('pairs')}."]
    asked = sum(a.get("asked", a.get("n", 0) + a.get("unjudged", 0)) for a in section.get("agreement", {}).values())
    reasons: Counter[str] = Counter()
    for a in section.get("agreement", {}).values():
        reasons.update(a.get("unjudged_reasons", {}))
    rows += [
        "",
        f"Asked {asked} pairs of the {section.get('items', asked)} sampled; judged "
        f"{section.get('overall', {}).get('n', 0)}"
        + (f"; unjudged: {'; '.join(f'{n} {why}' for why, n in reasons.items())}." if reasons else "."),
    ]
    g = section.get("guard_prompt")
    if g:
        rows += ["", guard_sentence(g)]
    return "\n".join(rows)


def guard_sentence(g: dict[str, Any]) -> str:
    """The guard's prompt-level precision on the gold prompts, in one sentence."""
    read = f"The guard read {g['asked']} gold prompts ({g['readable']} readable verdicts)"
    if g.get("precision") is None:
        return f"{read} and called none unsafe: its prompt-level precision is not measured."
    lo, hi = g["precision_ci95"]
    few = f" {FEW_MARK}" if few_items(g["called_unsafe"]) else ""
    recall = f", recall {g['recall']:.2f}" if g.get("recall") is not None else ""
    return (
        f"{read}; of the {g['called_unsafe']}{few} it called unsafe, {g['unsafe_and_harmlessness']} are "
        f"harmlessness prompts: prompt-level precision {g['precision']:.2f} (95% CI {lo:.2f}-{hi:.2f}){recall}."
    )


def verdict_on_chance(section: Mapping[str, Any]) -> str:
    """One honest sentence: is the judge distinguishable from chance (0.5) on the gold pairs?"""
    if section.get("status") == NOT_FOUND:
        return "The judge's agreement with human-labelled pairs was not measured for this release."
    parts = []
    for goal, a in section.get("agreement", {}).items():
        if not a.get("n"):
            continue
        if a.get("ties") == a["n"]:
            parts.append(f"{goal}: the judge tied all {a['n']} pairs: no signal either way")
            continue
        lo, hi = a["ci95"]
        where = (
            "its 95% interval contains chance (0.5): on these pairs the judge is not distinguishable from a coin flip"
            if lo <= CHANCE <= hi
            else "above chance (0.5)"
            if lo > CHANCE
            else "below chance (0.5): it tends to prefer the rejected answer"
        )
        parts.append(f"{goal}: {a['value']:.2f} on {a['n']} pairs, {where}")
    return "; ".join(parts) + "." if parts else "The judge scored none of the gold pairs."
