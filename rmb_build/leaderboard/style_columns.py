"""The leaderboard's columns for the style-controlled figures (results.json ``style``) and the length-neutral
pairwise accuracy (``length_control``): shown only where some RM of the table has them."""

from __future__ import annotations

from typing import Any, Sequence

from rmb_build.leaderboard.entries import Entry

STYLE = (
    ("style/hard", "Style hard", "hard"),
    ("style/normal", "Style normal", "normal"),
    ("style/easy", "Style easy", "easy"),
    ("style/prefers_detailed", "prefers detailed", "prefers_detailed"),
    ("style/prefers_markdown", "prefers markdown", "prefers_markdown"),
)
LENGTH = ("length/neutral", "length-neutral pairwise")


def figures(entry: Entry) -> dict[str, tuple[float | None, list[float] | None, int, int | None]]:
    """column -> (value, ci95, scenarios of few records its interval pools, records) of the entry; absent where
    its results have none."""
    out: dict[str, tuple[float | None, list[float] | None, int, int | None]] = {}
    overall = (entry.results.get("style") or {}).get("overall")
    if overall:
        n = overall.get("n")
        records = n if isinstance(n, int) else None
        pooled = int(overall.get("few_item_scenarios") or 0)  # set only where several scenarios are pooled
        for key, _, fig in STYLE:
            out[key] = (overall.get(fig), (overall.get("ci95") or {}).get(fig), pooled, records)
    lc = (entry.results.get("length_control") or {}).get("overall")
    if lc:
        out[LENGTH[0]] = (lc.get("length_neutral"), lc.get("length_neutral_ci95"), 0, None)
    return out


def columns(entries: Sequence[Entry]) -> list[tuple[str, str]]:
    """(key, title) of the extra columns some entry of the table has, in a fixed order."""
    have = set().union(*(figures(e) for e in entries)) if entries else set()
    return [(k, t) for k, t, _ in STYLE if k in have] + ([LENGTH] if LENGTH[0] in have else [])


def table(entries: Sequence[Entry]) -> dict[str, Any]:
    """What the index needs for one table: its extra columns and each RM's values (by evaluation: its slug)."""
    return {"columns": columns(entries), "values": {e.slug: figures(e) for e in entries}}


__all__ = ["columns", "figures", "table"]
