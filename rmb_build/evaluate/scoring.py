"""Score a release's unique texts (or judge its unique answer pairs) once each, through the cache.

Every unique (conversation, answer) text is scored exactly once, whatever number of items share
it; scores go to the persistent ``ScoreCache`` under the RM's fingerprint, committed batch by batch,
so a second run scores nothing and an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..records import BonItem, Item, PairwiseItem, text_key, unique_texts
from .adapters import JudgePair, RewardModel, ScoreText
from .cache import ScoreCache

COMMIT_EVERY_S = 5.0  # an interrupted run loses at most this much scoring work


@dataclass
class ScoringStats:
    naive: int = 0       # texts (or pairs) a per-item scorer would score
    unique: int = 0      # distinct texts (or pairs): what this toolkit needs
    cached: int = 0      # found in the cache
    scored: int = 0      # scored in this run and cached
    failed: int = 0      # not scored (a failed judgement): counted wrong, asked again next run
    rm: dict[str, Any] = field(default_factory=dict)  # the adapter's own counts (truncated texts, ...)

    def to_json(self) -> dict[str, Any]:
        return {"naive": self.naive, "unique": self.unique, "cached": self.cached, "scored": self.scored,
                "failed": self.failed, **self.rm}


def _sha(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def unit_key(item: Item, answer: str, per_scenario: bool) -> str:
    """The cache key of one of an item's texts (with the scenario when the RM's score depends on it)."""
    key = text_key(item.conversation, answer)
    return _sha(key, item.scenario_id) if per_scenario else key


def collect_texts(items: Sequence[Item], per_scenario: bool = False) -> list[ScoreText]:
    """The distinct texts of ``items`` in first-seen order (per scenario when ``per_scenario``)."""
    if not per_scenario:
        return [ScoreText(t.key, t.conversation, t.answer) for t in unique_texts(items)]
    groups: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        groups[item.scenario_id].append(item)
    return [ScoreText(_sha(t.key, sc), t.conversation, t.answer, sc)
            for sc, group in groups.items() for t in unique_texts(group)]


def item_pairs(item: Item) -> list[tuple[str, str]]:
    """(better, worse) answer pairs an item asks a judge about: chosen vs rejected, best vs each loser."""
    if isinstance(item, PairwiseItem):
        return [(item.chosen.answer, item.rejected.answer)]
    assert isinstance(item, BonItem)
    return [(item.best.answer, loser.answer) for loser in item.losers]


def pair_key(item: Item, first: str, second: str, per_scenario: bool) -> str:
    return _sha(unit_key(item, first, per_scenario), unit_key(item, second, per_scenario))


def collect_pairs(items: Sequence[Item], per_scenario: bool = False) -> list[JudgePair]:
    """The distinct (conversation, better, worse) pairs of ``items``, each once, in first-seen order."""
    seen: dict[str, JudgePair] = {}
    for item in items:
        for first, second in item_pairs(item):
            key = pair_key(item, first, second, per_scenario)
            if key not in seen:
                seen[key] = JudgePair(key, item.conversation, first, second, item.scenario_id)
    return list(seen.values())


def _run_cached(units: Sequence[Any], stream, rm: RewardModel, fp: str, cache: ScoreCache, desc: str,
                progress: bool, stats: ScoringStats) -> dict[str, Any]:
    """Values for ``units`` (each with ``.key``): cached ones read, the rest produced by ``stream``; those
    the RM calls cacheable are stored (a failed judgement is not, so the next run asks again)."""
    from tqdm.auto import tqdm

    values = cache.get_many(fp, (u.key for u in units))
    missing = [u for u in units if u.key not in values]
    stats.unique, stats.cached, stats.scored = len(units), len(units) - len(missing), 0
    if not missing:
        return values
    pending: dict[str, Any] = {}
    last = time.monotonic()
    bar = tqdm(total=len(missing), desc=desc, unit="text", disable=not progress, dynamic_ncols=True)
    try:
        for idx, batch_values in stream(missing):
            for i, v in zip(idx, batch_values):
                if rm.cacheable(v):
                    pending[missing[i].key] = v
                else:
                    values[missing[i].key] = v
                    stats.failed += 1
            bar.update(len(idx))
            if time.monotonic() - last >= COMMIT_EVERY_S:
                cache.put_many(fp, pending)
                values.update(pending)
                stats.scored += len(pending)
                pending, last = {}, time.monotonic()
    finally:
        # Also on Ctrl-C or an error: what was scored is kept for the next run.
        if pending:
            cache.put_many(fp, pending)
            values.update(pending)
            stats.scored += len(pending)
        bar.close()
    return values


def score_items(items: Sequence[Item], rm: RewardModel, cache: ScoreCache,
                progress: bool = True) -> tuple[dict[str, Any], ScoringStats]:
    """Cache key -> score (a float for a text RM, a votes dict for a pair judge) for every unit of ``items``."""
    fp = rm.fingerprint()
    cache.register(fp, rm.spec, rm.describe())
    stats = ScoringStats()
    if rm.compares_pairs:
        units: Sequence[Any] = collect_pairs(items, rm.per_scenario)
        stats.naive = sum(len(item_pairs(it)) for it in items)
        values = _run_cached(units, rm.judge_stream, rm, fp, cache, f"judging with {rm.spec}", progress, stats)
    else:
        units = collect_texts(items, rm.per_scenario)
        stats.naive = sum(len(it.answers()) for it in items)
        values = _run_cached(units, rm.score_stream, rm, fp, cache, f"scoring with {rm.spec}", progress, stats)
    stats.rm = dict(rm.stats)
    return values, stats
