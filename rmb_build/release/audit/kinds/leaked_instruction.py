"""``leaked_instruction``: a text matching a pattern of ``prompts/leak_patterns.txt`` (data-generation prompt text)."""

from __future__ import annotations

import re
from functools import lru_cache

from rmb_build.core.errors import InputError
from rmb_build.core.text import display
from rmb_build.release.audit.kind import TEXT_MEMO, AuditContext, Entry, PerItem, defect, defect_entry

LEAK_PATTERNS_FILE = "leak_patterns.txt"


@lru_cache(maxsize=8)
def load_leak_patterns(relpath: str = LEAK_PATTERNS_FILE) -> tuple[re.Pattern, ...]:
    """The compiled patterns of ``prompts/<relpath>``: one regular expression a line, ``#`` comments."""
    from rmb_build.core.prompting import load_prompt

    patterns = []
    for n, line in enumerate(load_prompt(relpath).splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                patterns.append(re.compile(line, re.IGNORECASE))
            except re.error as exc:
                raise InputError(f"prompts/{relpath}", f"invalid regular expression: {exc}", line=n) from None
    return tuple(patterns)


@defect(
    "leaked_instruction",
    """a turn or an answer matching a pattern of ``prompts/leak_patterns.txt``
         (regular expressions, case-insensitive, matched against the identity text).""",
    rank=90,
)
class _Leaks(PerItem):
    def __init__(self, ctx: AuditContext):
        patterns = ctx.leak_patterns

        # texts repeat (a conversation is in ~7 neighbouring items): a bounded memo, not one of every text
        @lru_cache(maxsize=TEXT_MEMO)
        def first_match(text: str) -> tuple[str, str] | None:
            return next(((p.pattern, m.group(0)) for p in patterns for m in [p.search(text)] if m), None)

        def check(ctx: AuditContext, e: Entry) -> dict | None:
            hits = [(name, hit) for name, text in e.texts if (hit := first_match(text))]
            if not hits:
                return None
            name, (pattern, matched) = hits[0]
            return defect_entry(
                e,
                f"{name} contains data-generation prompt text: {display(matched, 80)!r}",
                fields=[h[0] for h in hits],
                field=name,
                pattern=pattern,
            )

        super().__init__(ctx, check)
