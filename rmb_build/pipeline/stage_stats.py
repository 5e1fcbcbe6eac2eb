"""Small in-flow helpers between the stage tasks: a stage's stats and failures as log lines."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable, Mapping

from rmb_build.pipeline.run_state import merge_stats


def brief(stats: Mapping[str, Any], limit: int = 8) -> str:
    """The top-level numbers of ``stats`` as one short log line."""
    flat = (
        stats
        if any(_is_number(v) for v in stats.values())
        else merge_stats(v for v in stats.values() if isinstance(v, Mapping))
    )  # per-source stats: summed
    nums = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in flat.items() if _is_number(v)]
    return ", ".join(nums[:limit]) or "done"


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_DETAIL = re.compile(r"""\s*(?:['"(\[{]|\bin \d).*$""", re.S)
# what a failure reason says in words, where its own text is terse (the guard's names no verdict format)
_SAY = {"unreadable guard reply": "verdicts unreadable: the reply was not a Llama Guard verdict"}


def failure_reasons(failures: Iterable[Any]) -> str:
    """Failures by kind of reason, most first (``"43 verdicts unreadable: ..."``): each reason without
    its details (the reply it quotes, the sample counts), which ``failures.jsonl`` keeps."""
    kinds = Counter((_DETAIL.sub("", f.reason).rstrip(" :-") or f.reason or "no reason given")[:120] for f in failures)
    return "; ".join(f"{n} {_SAY.get(kind, kind)}" for kind, n in kinds.most_common())
