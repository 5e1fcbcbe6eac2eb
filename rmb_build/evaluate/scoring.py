"""Score a release's unique texts (or judge its unique answer pairs) once each, through the cache.

Every unique (conversation, answer) text is scored exactly once, whatever number of items share
it; scores go to the persistent ``ScoreCache`` under the RM's fingerprint, committed batch by batch,
so a second run scores nothing and an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, cast

from rmb_build.core.errors import RMBError
from rmb_build.core.finite import describe, finite_float
from rmb_build.core.items import Item, text_key
from rmb_build.core.taxonomy import PAIRWISE_SET
from rmb_build.evaluate import devices
from rmb_build.evaluate.adapters import JudgePair, PairJudge, RewardModel, ScoreText
from rmb_build.evaluate.cache import ScoreCache

COMMIT_EVERY_S = 5.0  # an interrupted run loses at most this much scoring work


@dataclass
class ScoringStats:
    naive: int = 0  # texts (or pairs) a per-item scorer would score
    unique: int = 0  # distinct texts (or pairs): what this toolkit needs
    cached: int = 0  # found in the cache
    scored: int = 0  # scored in this run and cached
    failed: int = 0  # not scored (a failed judgement): counted wrong, asked again next run
    system_first: int = 0  # items whose conversation starts with a system turn (harnesses refuse them)
    system_first_handling: str | None = None  # what this RM did with that turn (where there are such items)
    rm: dict[str, Any] = field(default_factory=dict)  # the adapter's own counts (truncated texts, ...)

    def to_json(self) -> dict[str, Any]:
        return {
            "naive": self.naive,
            "unique": self.unique,
            "cached": self.cached,
            "scored": self.scored,
            "failed": self.failed,
            "system_first": self.system_first,
            **({"system_first_handling": self.system_first_handling} if self.system_first else {}),
            **self.rm,
        }


def _sha(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def item_keys(items: Sequence[Item], per_scenario: bool = False) -> list[list[str]]:
    """Per item, the cache key of each answer in ``item.answers()`` order: its ``text_key`` (hashed with
    the scenario when the RM's score depends on it). Computed once per answer and reused."""
    out = []
    for item in items:
        keys = [text_key(item.conversation, a.answer) for a in item.answers()]
        out.append([_sha(k, item.scenario_id) for k in keys] if per_scenario else keys)
    return out


def pair_keys(keys: Sequence[str]) -> list[str]:
    """Keys of an item's (better, worse) pairs: chosen vs rejected, or best vs each loser."""
    return [_sha(keys[0], k) for k in keys[1:]]


def collect_texts(
    items: Sequence[Item], keys: Sequence[Sequence[str]] | None = None, per_scenario: bool = False
) -> list[ScoreText]:
    """The distinct texts of ``items``, each once, in first-seen order (per scenario when ``per_scenario``)."""
    keys = keys if keys is not None else item_keys(items, per_scenario)
    seen: dict[str, ScoreText] = {}
    for item, ks in zip(items, keys):
        for answer, k in zip(item.answers(), ks):
            if k not in seen:
                seen[k] = ScoreText(k, item.conversation, answer.answer, item.scenario_id if per_scenario else None)
    return list(seen.values())


def collect_pairs(
    items: Sequence[Item], keys: Sequence[Sequence[str]] | None = None, per_scenario: bool = False
) -> list[JudgePair]:
    """The distinct (conversation, better, worse) pairs of ``items``, each once, in first-seen order."""
    keys = keys if keys is not None else item_keys(items, per_scenario)
    seen: dict[str, JudgePair] = {}
    for item, ks in zip(items, keys):
        answers = item.answers()
        for worse, k in zip(answers[1:], pair_keys(ks)):
            if k not in seen:
                seen[k] = JudgePair(k, item.conversation, answers[0].answer, worse.answer, item.scenario_id)
    return list(seen.values())


def _item_of(key: str, items: Sequence[Item], keys: Sequence[Sequence[str]], pairs: bool) -> str:
    """The first item (and its answer, or its pair of answers) whose unit has cache ``key``, for an error line."""
    for item, ks in zip(items, keys):
        if key in ks:
            k = list(ks).index(key)
            if item.set_name == PAIRWISE_SET:
                field = "chosen vs reject" if pairs else ("chosen", "reject")[k]
            else:
                field = f"bon_best vs loser_list[{k}]" if pairs else (f"loser_list[{k - 1}]" if k else "bon_best")
            answer = "" if pairs else f" ({item.answers()[k].llm_name})"
            return f"{item.set_name} item {item.uid} ({item.scenario_id}), field '{field}'{answer}"
    return f"unit {key[:12]}"


def _refused(rm: RewardModel, value: object) -> str | None:
    """What makes ``value`` no unit's value, or None: a text RM's score is a finite number, a judge's votes are
    0, 1 or None (a failed sample); None is an unscored unit."""
    if value is None:
        return None
    if not rm.compares_pairs:
        return None if finite_float(value) is not None else describe(value)
    votes = [v for vs in value.values() for v in vs] if isinstance(value, dict) else [value]
    return next((f"a vote of {describe(v)}" for v in votes if v is not None and v not in (0, 1)), None)


def _run_cached(
    units: Sequence[Any],
    stream,
    rm: RewardModel,
    fp: str,
    cache: ScoreCache,
    desc: str,
    progress: bool,
    stats: ScoringStats,
    where: Callable[[str], str],
) -> dict[str, Any]:
    """Values for ``units`` (each with ``.key``): cached ones read, the rest produced by ``stream``; those
    the RM calls cacheable are stored (a failed judgement is not, so the next run asks again). A value, fresh or
    cached, that ``_refused`` names stops the run in one line naming the item (``where``: a key's item)."""
    from tqdm.auto import tqdm

    values = cache.get_many(fp, (u.key for u in units))
    for key, v in values.items():
        if (bad := _refused(rm, v)) is not None:
            raise RMBError(
                f"{cache.path}: the score cache holds {bad} for {where(key)} ({rm.spec}), written by an older "
                "rmb that did not check scores; remove that file to score again"
            )
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
                if (bad := _refused(rm, v)) is not None:
                    raise RMBError(
                        f"RM {rm.spec}: gave {bad} for {where(missing[i].key)}; a score must be a finite number "
                        "and a vote 0 or 1 (what was scored before it is cached)"
                    )
                if v is not None and not rm.compares_pairs:
                    v = float(v)
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


def score_items(
    items: Sequence[Item], rm: RewardModel, cache: ScoreCache, progress: bool = True
) -> tuple[dict[str, Any], list[list[str]], ScoringStats]:
    """Score every unit of ``items`` through the cache.

    Returns (cache key -> value, each item's unit keys, stats). A unit is a text for a text RM (value:
    a float; keys in ``item.answers()`` order) or a (better, worse) pair for a judge (value: votes).
    """
    many = len(rm.options.devices or ()) > 1
    if many:
        devices.check(rm)
    fp = rm.fingerprint()
    cache.register(fp, rm.spec, rm.describe())
    stats = ScoringStats()
    keys = item_keys(items, rm.per_scenario)
    stream: Callable[[Sequence[Any]], Iterator[tuple[list[int], Sequence[Any]]]]  # (indices, each unit's value)
    if rm.compares_pairs:
        units: Sequence[Any] = collect_pairs(items, keys, rm.per_scenario)
        keys = [pair_keys(k) for k in keys]
        desc, stream = f"judging with {rm.spec}", cast(PairJudge, rm).judge_stream  # compares_pairs: a PairJudge
    else:
        units = collect_texts(items, keys, rm.per_scenario)
        desc, stream = f"scoring with {rm.spec}", rm.score_stream
        if many:  # one replica per device; this process alone writes the cache
            stream = devices.parallel_stream(rm)
    stats.naive = sum(len(k) for k in keys)
    stats.system_first = sum(1 for it in items if it.conversation and it.conversation[0].role == "system")
    if stats.system_first:
        stats.system_first_handling = rm.system_turn_handling()
    values = _run_cached(
        units, stream, rm, fp, cache, desc, progress, stats, lambda key: _item_of(key, items, keys, rm.compares_pairs)
    )
    stats.rm = dict(rm.stats)
    return values, keys, stats
