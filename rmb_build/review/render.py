"""Item text as HTML that cannot run or load anything: Markdown (CommonMark plus tables) with raw HTML
turned off, so any tag in the text is escaped and shown as text; links and images stay as their text
(nothing on the page fetches or opens what an item names). Code blocks keep their language as a class.

Rendering takes seconds a megabyte (2 to 16 s for tables, measured): the page shows the first
``SHOWN_CHARS`` of a longer text (``shown_part``) unless asked for all of it, and keeps what it rendered
(the short texts many, the long ones few)."""

from __future__ import annotations

import threading
from functools import lru_cache

from markupsafe import Markup

SHOWN_CHARS = 20_000


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable(["link", "image", "autolink"])
    return md


def _render(text: str) -> Markup:
    return Markup(_markdown().render(text))


_short = lru_cache(maxsize=512)(_render)
_long = lru_cache(maxsize=4)(_render)
_one_long = threading.Lock()


def markdown_html(text: str) -> Markup:
    """``text`` rendered as safe HTML: every ``<`` of the text itself comes out as ``&lt;``."""
    if len(text) <= SHOWN_CHARS:
        return _short(text)
    with _one_long:  # a 2 MB table took 450 MB while it rendered: one at a time, the next finds it kept
        return _long(text)


def shown_part(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` itself, or where it is longer than ``limit`` its start up to a line's end (a table's row or
    a paragraph whole) within ``limit``."""
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit)
    return text[: end if end > limit // 2 else limit]


__all__ = ["SHOWN_CHARS", "markdown_html", "shown_part"]
