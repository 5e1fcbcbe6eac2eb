"""Item text as HTML that cannot run or load anything: Markdown (CommonMark plus tables) with raw HTML
turned off, so any tag in the text is escaped and shown as text; links and images stay as their text
(nothing on the page fetches or opens what an item names). Code blocks keep their language as a class."""

from __future__ import annotations

from functools import lru_cache

from markupsafe import Markup


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable(["link", "image", "autolink"])
    return md


def markdown_html(text: str) -> Markup:
    """``text`` rendered as safe HTML: every ``<`` of the text itself comes out as ``&lt;``."""
    return Markup(_markdown().render(text))


__all__ = ["markdown_html"]
