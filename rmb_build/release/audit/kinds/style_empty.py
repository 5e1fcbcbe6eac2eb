"""``style_empty``: a Style_set record with an empty text."""

from __future__ import annotations

from rmb_build.core.text import identity
from rmb_build.release.audit.kind import defect, no_item
from rmb_build.release.audit.kinds._style import StyleCheck, style_defect
from rmb_build.release.style_set import StyleRecord


@defect(
    "style_empty", "a Style_set record with an empty prompt, turn or variant by the identity rule.", no_item, rank=160
)
class _StyleEmpty(StyleCheck):
    def check(self, rec: StyleRecord) -> dict | None:
        texts = [("prompt", rec.prompt)] + [
            (f"conversation_input[{i}]", t.content) for i, t in enumerate(rec.conversation)
        ]
        texts += [(f"{side}[{i}]", v) for side in ("chosen", "rejected") for i, v in enumerate(getattr(rec, side))]
        empty = [name for name, text in texts if not identity(text)]
        return style_defect(rec, f"empty: {', '.join(empty)}") if empty else None
