"""report.md's sections for the style-controlled figures (``style``) and length control (``length_control``)."""

from __future__ import annotations

from typing import Any, Mapping

from rmb_build.core.intervals import FEW_MARK, POOLED_FEW_NOTE, few_count_note, few_items

STYLE_COLUMNS = ("easy", "normal", "hard", "average", "prefers_detailed", "prefers_markdown")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float] | None) -> str:
    return "" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _cell(row: Mapping[str, Any], fig: str) -> str:
    return f"{_pct(row.get(fig))} {_ci((row.get('ci95') or {}).get(fig))}"


def style_section(style: Mapping[str, Any] | None) -> list[str]:
    """RM-Bench's figures per goal, task and scenario, and the two style-bias figures."""
    if not style:
        return []
    if "skipped" in style:
        return ["## Style-controlled accuracy (Style_set)", "", f"Not computed: {style['skipped']}.", ""]
    out = [
        "## Style-controlled accuracy (Style_set)",
        "",
        f"RM-Bench's matrix over {style['n_records']} style records: **hard** = chosen in a plainer style than "
        "rejected, **normal** = the same style, **easy** = chosen fancier; a tie counts as wrong. "
        "**prefers detailed / markdown**: how often the detailed (markdown) variant of the same answer scored "
        "above its concise (plain) one. Groups are means of their scenarios; intervals over records. "
        f"{FEW_MARK} beside n: {few_count_note('records')}; beside a group's n: {POOLED_FEW_NOTE}.",
        "",
        *_table(style),
    ]
    if style.get("bon"):
        out += [
            f"Best-of-N records ({style['bon']['n_records']}): each BoN item's winner against one loser, "
            "in the same matrix.",
            "",
            *_table(style["bon"]),
        ]
    return out


def _table(style: Mapping[str, Any]) -> list[str]:
    if not style["overall"]:
        return ["No records.", ""]
    out = [
        "| group | n | " + " | ".join(c.replace("_", " ") for c in STYLE_COLUMNS) + " |",
        "| --- | ---: |" + " ---: |" * len(STYLE_COLUMNS),
    ]
    groups = [("overall", style["overall"])]
    groups += [(g, v) for g, v in style["goals"].items()]
    groups += [(t, v) for t, v in style["tasks"].items()]
    groups += [(s, v) for s, v in style["scenarios"].items()]
    for name, row in groups:
        n = f"{row['n']} {FEW_MARK}" if few_items(row["n"]) or row.get("few_item_scenarios") else str(row["n"])
        out.append(f"| {name} | {n} | " + " | ".join(_cell(row, c) for c in STYLE_COLUMNS) + " |")
    return out + [""]


def length_control_section(lc: Mapping[str, Any] | None) -> list[str]:
    """Plain and length-neutral pairwise accuracy per goal, and accuracy by length-difference bins."""
    if not lc or not lc.get("overall"):
        return []
    out = [
        "## Length-controlled accuracy (pairwise)",
        "",
        f"Length difference: {lc['unit']}. Length-neutral accuracy: {lc['estimator']}.",
        "",
        "| group | n | accuracy | chosen longer | length-neutral | 95% CI |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    groups = [*lc["goals"].items(), ("overall", lc["overall"])]
    for name, g in groups:
        neutral = _pct(g["length_neutral"]) if g["length_neutral"] is not None else f"– ({g['length_neutral_reason']})"
        out.append(
            f"| {name} | {g['n']} | {_pct(g['accuracy'])} {_ci(g['ci95'])} | {_pct(g['chosen_longer_share'])} | "
            f"{neutral} | {_ci(g['length_neutral_ci95'])} |"
        )
    bins = lc["overall"]["bins"]
    out += ["", "| length difference (chars) | n | accuracy | 95% CI |", "| --- | ---: | ---: | --- |"]
    out += [f"| {b['label']} | {b['n']} | {_pct(b['accuracy'])} | {_ci(b['ci95'])} |" for b in bins]
    return out + [""]


__all__ = ["length_control_section", "style_section"]
