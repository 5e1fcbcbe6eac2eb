"""Markdown pieces the card's sections share: a table, a value in words."""

from __future__ import annotations

from typing import Any, Iterable


def table(header: list[str], rows: Iterable[list[Any]]) -> str:
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def describe(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {describe(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(describe(v) for v in value)
    return str(value)
