"""Text as the toolkit compares, searches, shows and prompts with it: one rule for each.

Identity (``identity``): two texts are *the same* when they are equal after Unicode NFKC, case
folding (``str.casefold``), and collapsing every run of whitespace (``str.isspace``, Unicode-aware)
to one space, trimmed. NFKC merges canonical forms (an NFC ``é`` and an NFD ``e`` + combining
accent) and compatibility forms (full-width ``ＡＢＣ``, no-break spaces); case folding merges answers
that differ only in capitals, which a reward model cannot be asked to tell apart in a fair pair.
Every identity decision uses it: ``build_sets`` merging a query's equal answers, dedup's exact
duplicates, contamination's exact matches, and the audit's ``identical_pair``, ``unwinnable_bon``,
``contradiction`` and ``empty_text``. Exact copies (``duplicate_item``) compare texts as stored.

Near-duplicate search (``search_text``): a query is searched by its user turns, in order, joined by
a blank line (the assistant's replies are not the query); the embedding model gets it as written.

Display (``display``): a text cut for a one-line message or a log entry.

Rendering (``render_conversation``): a conversation as plain text for an LLM prompt, one
``[Role]`` block a turn. Templates (``fill``): prompt files are Jinja2 templates (``{{ name }}``),
filled by one StrictUndefined environment with autoescape off, so a missing value raises and
inserted text is never re-scanned.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import jinja2

from rmb_build.core.items import Turn

BLOCK = "[{role}]\n{content}"


def identity(text: str) -> str:
    """``text`` reduced to what decides identity: NFKC, case-folded, whitespace collapsed, trimmed."""
    # str.split() splits on exactly the characters that re's \s matches (str.isspace), runs and ends
    # included, and is several times faster than re.sub on long answers.
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def unfinished_text(text: str) -> str | None:
    """Why an answer's text reads as unfinished (None when it does not): it ends in a ":" lead-in
    ("The code is:") or leaves a Markdown code fence open."""
    stripped = text.rstrip()
    if stripped.endswith(":"):
        return "ends in a ':' lead-in"
    if sum(1 for line in stripped.splitlines() if line.lstrip().startswith("```")) % 2:
        return "leaves a code fence open"
    return None


def search_text(conversation: Sequence[Turn]) -> str:
    """The text a query is searched and embedded by (dedup, contamination): its user turns, in order."""
    return "\n\n".join(t.content for t in conversation if t.role == "user")


def last_user_turn(conversation: Sequence[Turn]) -> str:
    """What a query asks now (the classifier's text, the language filter's): its last user turn;
    earlier turns only set the scene."""
    for turn in reversed(conversation):
        if turn.role == "user":
            return turn.content
    return conversation[-1].content if conversation else ""


def display(text: str, max_chars: int = 200) -> str:
    """``text`` cut to ``max_chars`` for a message (``...`` marks a cut)."""
    return text if len(text) <= max_chars else text[: max(max_chars - 3, 0)] + "..."


def render_conversation(
    turns: Iterable[Turn | tuple[str, str]], *, fmt: str = BLOCK, roles: Mapping[str, str] | None = None
) -> str:
    """Turns as text, one ``fmt`` block each (``[User]`` / ``[Assistant]`` by default), blank lines between.

    ``roles`` maps a role to the name shown (default: the role capitalised).
    """
    blocks = []
    for t in turns:
        role, content = (t.role, t.content) if isinstance(t, Turn) else t
        shown = roles[role] if roles is not None else role.capitalize()
        blocks.append(fmt.format(role=shown, content=content))
    return "\n\n".join(blocks)


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


@lru_cache(maxsize=64)
def _compiled(template: str) -> jinja2.Template:
    return _ENV.from_string(template)


def fill(template: str, **values: object) -> str:
    """``template`` (Jinja2 text, surrounding whitespace trimmed: a prompt file's final newline is not
    part of the prompt) rendered with ``values``; a missing value raises ``jinja2.UndefinedError``."""
    return _compiled(template.strip()).render(**values)


__all__ = ["identity", "search_text", "display", "render_conversation", "fill"]
