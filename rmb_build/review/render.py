"""Item text as HTML that cannot run or load anything: Markdown (CommonMark plus tables) with raw HTML
turned off, so any tag in the text is escaped and shown as text; links and images stay as their text
(nothing on the page fetches or opens what an item names). Code blocks keep their language as a class.

Rendering takes seconds a megabyte (2 to 16 s for tables, measured): the page shows the first
``SHOWN_CHARS`` of a longer text (``shown_part``) unless asked for all of it, and keeps what it rendered
(the short texts many, the long ones few). All of a text over ``MARKDOWN_CHARS`` is shown as plain text
(``plain_html``: escaped, in milliseconds): its Markdown took 51 s and 1.48 GB for 2 MB, and the
collector's passes over its millions of tokens held every other annotator's page for seconds."""

from __future__ import annotations

import threading
from functools import lru_cache

from markupsafe import Markup, escape

SHOWN_CHARS = 20_000
MARKDOWN_CHARS = 100_000  # the longest text rendered as Markdown (a fraction of a second)


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


def plain_html(text: str) -> Markup:
    """``text`` as escaped plain text, its lines and spaces kept."""
    return Markup('<pre class="plain">') + escape(text) + Markup("</pre>")


def text_html(text: str) -> Markup:
    """``text`` as Markdown (``markdown_html``) up to ``MARKDOWN_CHARS``, as plain text past it."""
    return markdown_html(text) if len(text) <= MARKDOWN_CHARS else plain_html(text)


def shown_part(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` itself, or where it is longer than ``limit`` its start up to a line's end (a table's row or
    a paragraph whole) within ``limit``."""
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit)
    return text[: end if end > limit // 2 else limit]


__all__ = ["MARKDOWN_CHARS", "SHOWN_CHARS", "markdown_html", "plain_html", "shown_part", "text_html"]
