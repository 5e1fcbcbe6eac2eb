"""The few-item mark's words: said once, in ``core.intervals``."""

from __future__ import annotations

import re
from pathlib import Path

from rmb_build.core import intervals


def test_the_few_marks_words_are_spelled_only_in_core_intervals():
    """What † means is said by ``few_count_note`` and ``POOLED_FEW_NOTE``: a module that spells "fewer than 10" (or
    its own reading of the mark) again would go on saying 10, or "read the interval" without "conservative", if the
    rule moved. Failed before: review/agreement.py and evaluate/report_style.py spelled it."""
    package = Path(intervals.__file__).resolve().parents[1]
    spelled = [
        f"{path.relative_to(package)}:{n}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "intervals.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"fewer than 10\b", line)
    ]
    assert not spelled, spelled
