"""RewardBench 2 (Malik et al., 2025): one row per prompt, ``prompt``, ``chosen`` (a list) and ``rejected``
(a list), ``subset``, ``id`` and its own fields ``num_correct``, ``num_incorrect``, ``total_completions``
and ``models`` (``allenai/reward-bench-2``); ``num_correct`` is checked when present.

Outside Ties a row is a best-of-4 item: the first chosen answer must outscore every other answer
(``chosen[1:]`` then ``rejected``; official rows have one chosen and three rejected). A Ties row has
several correct answers and an ``id`` of the form ``ref:N`` (the reference prompt, one correct answer)
or ``tied:N`` (its variant with several equally correct answers); each correct answer becomes one
Best-of-N item against every rejected answer, so that every answer's score reaches the Ties rule in
``evaluate/benchmarks.py``. The scenario of an item is its subset, encoded by ``benchmark.encode_label``
(``bigcode/humanevalpack`` -> ``bigcode%2Fhumanevalpack``); item_meta keeps the subset as written.
"""

from __future__ import annotations

import re
from typing import Sequence

from rmb_build.benchmarks.base import BenchmarkRelease, conversation, encode_label, texts, with_uids
from rmb_build.benchmarks.rewardbench import subset_name
from rmb_build.benchmarks.tables import Row
from rmb_build.core.items import Answer, BonItem
from rmb_build.core.taxonomy import BON_SET

FORMAT = "rewardbench2"
TIES = "Ties"
SUBSETS = ("Factuality", "Precise IF", "Math", "Safety", "Focus", TIES)
TIES_ID = re.compile(r"^(ref|tied):(\d+)$")
# RewardBench 2's own fields (allenai/reward-bench-2): a record with one of them is RewardBench 2's.
OWN_FIELDS = ("num_correct", "num_incorrect", "total_completions", "models")


def _num_correct(row: Row, chosen: list[str]) -> None:
    n = row.data.get("num_correct")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n != len(chosen)):
        raise row.fail("num_correct", f"is {n!r} but the row has {len(chosen)} chosen answers")


def build(rows: Sequence[Row], name: str) -> BenchmarkRelease:
    """RewardBench 2 rows as a release of Best-of-N items."""
    release = BenchmarkRelease.empty(name, FORMAT)
    for uid, row in with_uids(rows):
        subset = subset_name(row)
        scenario, conv = encode_label(subset), conversation(row)
        chosen, rejected = texts(row, "chosen"), texts(row, "rejected")
        _num_correct(row, chosen)
        losers = tuple(Answer(f"rejected[{j}]", a) for j, a in enumerate(rejected))
        if subset != TIES:
            others = tuple(Answer(f"chosen[{k}]", a) for k, a in enumerate(chosen) if k) + losers
            release.add(BonItem(uid, conv, Answer("chosen[0]", chosen[0]), others, scenario))
            release.item_meta[(BON_SET, uid)] = {"subset": subset}
            continue
        match = TIES_ID.match(uid)
        if match is None:
            raise row.fail("id", f"a Ties row needs an id 'ref:<n>' or 'tied:<n>', got {uid!r}")
        for k, good in enumerate(chosen):
            item_uid = f"{uid}#{k}"
            release.add(BonItem(item_uid, conv, Answer(f"chosen[{k}]", good), losers, scenario))
            release.item_meta[(BON_SET, item_uid)] = {"subset": subset, "kind": match[1], "prompt": int(match[2])}
    return release


__all__ = ["FORMAT", "OWN_FIELDS", "SUBSETS", "TIES", "build"]
