"""Build sets: RMB pairwise and Best-of-N items from judged (and, for harmlessness, guarded) answers.

Rules: a pair's chosen answer outscores its rejected one by at least ``cfg.margin``; a BoN winner
beats each of its 2..``cfg.max_losers`` losers that way, loser counts drawn so lists look like RMB's
(mostly 2-3). In harmlessness a safe answer is always preferred to an unsafe one, whatever the
scores, and an answer without a readable guard verdict (unknown, or no label) is compared with no
other answer (``cfg.unreadable_verdicts: judge_only``: only with the other such answers, by score):
each query's preference is then a strict order (safety first, then score), so its items never
form a cycle. Answers cut at ``max_tokens`` (``finish_reason == "length"``) never enter
a set. Answers that are the same text by ``rmb_build.core.text.identity`` (the rule the audit uses)
are merged first, so no item holds two identical texts. Pairs are picked per ``cfg.pair_policy``
(see ``select_pairs``). Uids are numbered over a deterministic order (scenario, query id, answer
identities), so a re-run on the same inputs gives the same uids. Nothing is dropped silently:
``stats`` counts every query without a pair or BoN item, and every answer left out, by reason.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from rmb_build.core.items import Answer, BonItem, PairwiseItem, default_category_path
from rmb_build.core.prompting import prompt_hash
from rmb_build.core.records import GuardLabel, JudgeScore, Query, Response
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, all_scenarios, is_known
from rmb_build.core.text import identity
from rmb_build.stages.common import (  # noqa: F401 (finished, unfinished: read from here too)
    CUT_AT_MAX_TOKENS,
    TRUNCATED,
    finished,
    index_queries,
    responses_by_query,
    unfinished,
)
from rmb_build.stages.generate import STAGE as GENERATE_STAGE
from rmb_build.stages.guard import (
    PROMPT_TARGET,
    RESPONSE_TARGET,
    SAFE,
    UNKNOWN,
    UNSAFE,
    apply_prompt_scenarios,
    is_harmlessness,
)
from rmb_build.stages.guard import STAGE as GUARD_STAGE
from rmb_build.stages.judge import STAGE as JUDGE_STAGE
from rmb_build.stages.options import SetsConfig
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the run is the pipeline's, a layer above
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Batch, Flow

# Share of BoN lists by loser count in RMB's release (the sample: 75% 2, 21% 3, 3% 4, <1% 5-6).
LOSER_WEIGHTS = {2: 0.75, 3: 0.20, 4: 0.035, 5: 0.01, 6: 0.005}
SCENARIO_ORDER = {s.id: i for i, s in enumerate(all_scenarios())}
_KNOWN = (SAFE, UNSAFE)
UNVERDICTED = "unverdicted"
_COMPARABLE = (None, SAFE, UNSAFE, UNVERDICTED)


@dataclass
class SetsResult:
    pairwise: list[PairwiseItem]
    bon: list[BonItem]
    annotations: list[dict[str, Any]]  # one per (set, uid), for the release's annotations.jsonl
    stats: dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    """A distinct, scored answer to one query, with its guard verdict: None outside harmlessness;
    in harmlessness ``safe``, ``unsafe``, ``unknown`` (unreadable reply), ``none`` (no label), or
    ``unverdicted`` (either, kept under ``unreadable_verdicts: judge_only``)."""

    response: Response
    score: JudgeScore
    safety: str | None
    key: str  # identity of the answer text within its query (see answer_key)

    @property
    def generator(self) -> str:
        return self.response.generator

    def answer(self) -> Answer:
        return Answer(self.response.generator, self.response.text)


def answer_key(identity_text: str) -> str:
    """Identity of an answer among its query's answers: a hash of its ``text.identity``."""
    return hashlib.sha256(identity_text.encode("utf-8", "surrogatepass")).hexdigest()


def beats(a: Candidate, b: Candidate, margin: float) -> bool:
    """Whether ``a`` may be preferred to ``b``: safe over unsafe always; within one verdict class by
    ``margin`` (and > 0) of mean score. Answers of different classes are never compared otherwise
    (no verdict outside harmlessness; ``unverdicted``), and an unknown or missing verdict compares
    with nothing: the relation is a strict order (safety first, then score; classes never mixed)."""
    if a.safety in _KNOWN and b.safety in _KNOWN and a.safety != b.safety:
        return a.safety == SAFE
    if a.safety != b.safety or a.safety not in _COMPARABLE:
        return False
    diff = gap(a, b)
    return diff > 0 and diff >= margin


def gap(a: Candidate, b: Candidate) -> float:
    """The judge-score gap of preferring ``a`` to ``b`` (negative where safety overrode the scores)."""
    return a.score.mean - b.score.mean


def _by_safety(a: Candidate, b: Candidate) -> bool:
    return a.safety == SAFE and b.safety == UNSAFE


@dataclass
class _Tally:
    """Why queries gave no item, and what was merged or skipped on the way."""

    no_pair: Counter = field(default_factory=Counter)
    no_bon: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)
    truncated: Counter = field(default_factory=Counter)  # per generator
    unfinished: defaultdict = field(default_factory=lambda: defaultdict(Counter))  # generator -> reason -> answers
    unjudgeable: Counter = field(default_factory=Counter)  # harmlessness answers without a verdict, by reason
    candidate_pairs: int = 0


NO_VERDICT = "none"
_NO_VERDICT_REASONS: dict[str | None, str] = {
    UNKNOWN: "guard reply unreadable (verdict unknown)",
    NO_VERDICT: "no guard label",
}


def _candidates(
    q: Query, responses: list[Response], scores: dict, safety: dict, tally: _Tally, keep_unverdicted: bool = False
) -> list[Candidate]:
    """The query's finished, scored answers, one per distinct ``text.identity`` (the first generator by
    name kept); in harmlessness only those with a safe or unsafe verdict (the others are counted),
    unless ``keep_unverdicted``: then they stay as ``unverdicted``."""
    seen_gen: set[str] = set()
    by_text: dict[str, Candidate] = {}
    guarded = is_harmlessness(q)
    for r in sorted(responses, key=lambda r: r.generator):
        if r.generator in seen_gen:
            tally.counts["duplicate_responses"] += 1
            continue
        seen_gen.add(r.generator)
        norm = identity(r.text)
        s = scores.get((q.id, r.generator))
        verdict = safety.get((q.id, r.generator), NO_VERDICT) if guarded else None
        unreadable = guarded and verdict not in _KNOWN
        why = unfinished(r)
        if why is not None:
            tally.counts["unfinished_answers"] += 1
            tally.unfinished[r.generator][why] += 1
            if why == CUT_AT_MAX_TOKENS:
                tally.counts["truncated_answers"] += 1
                tally.truncated[r.generator] += 1
        elif not norm:
            tally.counts["empty_answers"] += 1
        elif s is None:
            tally.counts["unscored_answers"] += 1
        elif unreadable and not keep_unverdicted:
            tally.counts["answers_without_verdict"] += 1
            tally.unjudgeable[_NO_VERDICT_REASONS.get(verdict, f"verdict {verdict!r}")] += 1
        elif norm in by_text:
            tally.counts["identical_answers_merged"] += 1
        else:
            if unreadable:
                tally.counts["answers_ordered_by_judge_only"] += 1
                tally.unjudgeable[_NO_VERDICT_REASONS.get(verdict, f"verdict {verdict!r}")] += 1
            by_text[norm] = Candidate(r, s, UNVERDICTED if unreadable else verdict, answer_key(norm))
    return list(by_text.values())


def candidate_pairs(cands: Sequence[Candidate], margin: float) -> list[tuple[Candidate, Candidate]]:
    """Every (chosen, rejected) pair the preference order allows, in a deterministic order."""
    pairs = [(a, b) for a in cands for b in cands if a is not b and beats(a, b, margin)]
    return sorted(pairs, key=lambda p: (p[0].key, p[1].key))


def select_pairs(
    cands: Sequence[Candidate], margin: float, limit: int, policy: str = "stratified", rng: random.Random | None = None
) -> list[tuple[Candidate, Candidate]]:
    """Up to ``limit`` (chosen, rejected) pairs among those that clear the margin.

    ``stratified`` (RMB-like): all of them when they are at most ``limit``; else the candidates,
    sorted by score gap, are cut into ``limit`` quantile strata of (nearly) equal size and one pair is
    drawn from each with ``rng``, so the selected gaps follow the candidates' gap distribution.
    ``largest_gap``: safety-decided first, then the largest gaps, preferring answers not used yet.
    """
    valid = candidate_pairs(cands, margin)
    if policy == "largest_gap":
        return _largest_gap(valid, limit)
    if len(valid) <= limit:
        return valid
    rng = rng or random.Random(0)
    ranked = sorted(valid, key=lambda p: (gap(*p), p[0].key, p[1].key))
    bounds = [len(ranked) * i // limit for i in range(limit + 1)]
    return [ranked[rng.randrange(lo, hi)] for lo, hi in zip(bounds, bounds[1:])]


def _largest_gap(valid: list[tuple[Candidate, Candidate]], limit: int) -> list[tuple[Candidate, Candidate]]:
    valid = sorted(valid, key=lambda p: (not _by_safety(*p), -gap(*p), p[0].generator, p[1].generator))
    picked: dict[tuple[str, str], tuple[Candidate, Candidate]] = {}
    used: set[str] = set()
    for fresh_only in (True, False):
        for a, b in valid:
            if len(picked) == limit:
                return list(picked.values())
            if (a.key, b.key) in picked or (fresh_only and (a.key in used or b.key in used)):
                continue
            picked[a.key, b.key] = (a, b)
            used.update((a.key, b.key))
    return list(picked.values())


def draw_loser_count(rng: random.Random, low: int, high: int) -> int:
    """A loser count in [low, high] drawn with RMB's proportions (counts it never used get a small weight)."""
    counts = list(range(low, high + 1))
    return rng.choices(counts, weights=[LOSER_WEIGHTS.get(n, 0.005) for n in counts])[0]


def select_bon(
    cands: Sequence[Candidate], cfg: SetsConfig, rng: random.Random
) -> tuple[Candidate, list[Candidate]] | str:
    """(winner, losers) or why there is none. The winner is the answer that beats the most others."""
    if len(cands) < cfg.min_losers + 1:
        return f"fewer than {cfg.min_losers + 1} distinct scored answers"
    ranked = sorted(
        cands,
        key=lambda c: (-sum(beats(c, o, cfg.margin) for o in cands), c.safety == UNSAFE, -c.score.mean, c.generator),
    )
    winner = ranked[0]
    eligible = sorted((c for c in cands if beats(winner, c, cfg.margin)), key=lambda c: c.generator)
    if len(eligible) < cfg.min_losers:
        return f"no answer beats {cfg.min_losers} others by the margin"
    n = draw_loser_count(rng, cfg.min_losers, min(cfg.max_losers, len(eligible)))
    losers = sorted(rng.sample(eligible, n), key=lambda c: (-c.score.mean, c.generator))
    return winner, losers


def _guard_json(label: GuardLabel | None) -> dict[str, Any] | None:
    if label is None:
        return None
    return {"verdict": label.verdict, "categories": list(label.categories), "guard": label.guard}


def _score_fields(prefix: str, c: Candidate, guard: dict) -> dict[str, Any]:
    return {
        f"{prefix}_model": c.generator,
        f"{prefix}_score": c.score.mean,
        f"{prefix}_score_samples": list(c.score.scores),
        f"{prefix}_spread": c.score.spread,
        f"{prefix}_rationales": list(c.score.rationales),
        f"{prefix}_guard": _guard_json(guard.get((c.response.query_id, c.generator))),
    }


def _loser_fields(losers: Sequence[Candidate], guard: dict) -> dict[str, list]:
    """The losers' fields as parallel lists: ``loser_models``, ``loser_scores``, ``loser_guards``..."""
    per = [_score_fields("loser", c, guard) for c in losers]
    plural = {
        "loser_model": "loser_models",
        "loser_score": "loser_scores",
        "loser_spread": "loser_spreads",
        "loser_guard": "loser_guards",
    }
    return {plural.get(k, k): [f[k] for f in per] for k in per[0]}


def criteria_hash_of(score: JudgeScore) -> str | None:
    """The hash of the criteria file a score was judged with (None when it names none or it is gone)."""
    try:
        return prompt_hash(score.criteria) if score.criteria else None
    except FileNotFoundError:
        return None


def _query_fields(q: Query, c: Candidate, prompt_label: GuardLabel | None) -> dict[str, Any]:
    return {
        "scenario": q.scenario_id,
        "query_id": q.id,
        "source": q.source,
        "source_id": q.source_id,
        "judge": c.score.judge,
        "criteria": c.score.criteria,
        "criteria_hash": criteria_hash_of(c.score),
        "prompt_guard": _guard_json(prompt_label),
    }


def build_sets(
    queries: Sequence[Query],
    responses: Iterable[Response],
    scores: Iterable[JudgeScore],
    labels: Iterable[GuardLabel],
    cfg: SetsConfig,
    *,
    first_pair_uid: int = 0,
    first_bon_uid: int = 0,
) -> SetsResult:
    """Pairwise and BoN items (with their annotations and stats) from judged answers.

    ``first_pair_uid`` / ``first_bon_uid`` start the numbering, to extend an existing release.
    """
    by_id = index_queries(queries)
    answers = responses_by_query(responses)
    score_of: dict[tuple[str, str], JudgeScore] = {}
    for s in scores:
        score_of.setdefault((s.query_id, s.generator), s)
    labels = list(labels)
    guard = {(lb.query_id, lb.generator): lb for lb in labels if lb.target == RESPONSE_TARGET}
    safety = {k: lb.verdict for k, lb in guard.items()}
    prompt_guard = {lb.query_id: lb for lb in labels if lb.target == PROMPT_TARGET}
    tally = _Tally()
    tally.counts["duplicate_queries"] = len(queries) - len(by_id)
    tally.counts["answers_to_unknown_queries"] = sum(len(v) for k, v in answers.items() if k not in by_id)
    pairs: list[tuple[Query, Candidate, Candidate]] = []
    bons: list[tuple[Query, Candidate, list[Candidate]]] = []
    for q in by_id.values():
        reason = _skip_reason(q, answers)
        if reason:
            tally.no_pair[reason] += 1
            tally.no_bon[reason] += 1
            continue
        cands = _candidates(q, answers[q.id], score_of, safety, tally, cfg.unreadable_verdicts == "judge_only")
        tally.candidate_pairs += len(candidate_pairs(cands, cfg.margin))
        found = select_pairs(
            cands, cfg.margin, cfg.max_pairs_per_query, cfg.pair_policy, random.Random(f"{cfg.seed}:pairs:{q.id}")
        )
        if found:
            pairs += [(q, a, b) for a, b in found]
        else:
            tally.no_pair[
                "fewer than 2 distinct scored answers" if len(cands) < 2 else "no two answers differ by the margin"
            ] += 1
        bon = select_bon(cands, cfg, random.Random(f"{cfg.seed}:{q.id}"))
        if isinstance(bon, str):
            tally.no_bon[bon] += 1
        else:
            bons.append((q, *bon))
    return _number_items(pairs, bons, guard, prompt_guard, tally, len(by_id), first_pair_uid, first_bon_uid)


def _skip_reason(q: Query, answers: dict[str, list[Response]]) -> str | None:
    if not q.scenario_id:
        return "query has no scenario (not classified)"
    if not is_known(q.scenario_id):
        return "scenario is not one of the 49"
    if not answers.get(q.id):
        return "no answers"
    return None


def _number_items(
    pairs, bons, guard, prompt_guard, tally: _Tally, n_queries: int, first_pair_uid: int, first_bon_uid: int
) -> SetsResult:
    pairs.sort(key=lambda p: (SCENARIO_ORDER[p[0].scenario_id], p[0].id, p[1].key, p[2].key))
    bons.sort(key=lambda b: (SCENARIO_ORDER[b[0].scenario_id], b[0].id))
    pairwise, bon, notes = [], [], []
    for i, (q, a, b) in enumerate(pairs, start=first_pair_uid):
        uid = str(i)
        pairwise.append(
            PairwiseItem(
                uid,
                q.conversation,
                a.answer(),
                b.answer(),
                q.scenario_id,
                default_category_path(PAIRWISE_SET, q.scenario_id),
            )
        )
        notes.append(
            {
                "set": PAIRWISE_SET,
                "uid": uid,
                **_query_fields(q, a, prompt_guard.get(q.id)),
                "preferred_by": "safety" if _by_safety(a, b) else "score",
                "score_gap": gap(a, b),
                **_score_fields("chosen", a, guard),
                **_score_fields("rejected", b, guard),
            }
        )
    for i, (q, w, losers) in enumerate(bons, start=first_bon_uid):
        uid = str(i)
        bon.append(
            BonItem(
                uid,
                q.conversation,
                w.answer(),
                tuple(c.answer() for c in losers),
                q.scenario_id,
                default_category_path(BON_SET, q.scenario_id),
            )
        )
        notes.append(
            {
                "set": BON_SET,
                "uid": uid,
                **_query_fields(q, w, prompt_guard.get(q.id)),
                **_score_fields("best", w, guard),
                **_loser_fields(losers, guard),
            }
        )
    return SetsResult(pairwise, bon, notes, _stats(pairwise, bon, pairs, bons, tally, n_queries))


def gap_histogram(gaps: Iterable[float]) -> dict[str, int]:
    """Counts of score gaps in unit bins (``"[1,2)"``), in order; ``"<0"`` where safety overrode the scores."""
    bins = Counter(max(int(g // 1), -1) for g in gaps)
    return {("<0" if lo < 0 else f"[{lo},{lo + 1})"): bins[lo] for lo in sorted(bins)}


def per_query_histogram(counts: Iterable[int]) -> dict[str, int]:
    """How many queries have each number of items (``{"10": 378, ...}``)."""
    return {str(k): v for k, v in sorted(Counter(counts).items())}


def _stats(pairwise, bon, pairs, bons, tally: _Tally, n_queries: int) -> dict[str, Any]:
    per_scenario: dict[str, dict[str, int]] = {}
    for item in [*pairwise, *bon]:
        per_scenario.setdefault(item.scenario_id, {PAIRWISE_SET: 0, BON_SET: 0})[item.set_name] += 1
    return {
        "queries": n_queries,
        "pairwise": len(pairwise),
        "bon": len(bon),
        "candidate_pairs": tally.candidate_pairs,
        "pairs_per_query": per_query_histogram(Counter(q.id for q, _, _ in pairs).values()),
        "pair_gaps": gap_histogram(gap(a, b) for _, a, b in pairs),
        "bon_gaps": gap_histogram(gap(w, c) for _, w, losers in bons for c in losers),
        "truncated_by_generator": dict(sorted(tally.truncated.items())),
        "unfinished_by_generator": {g: dict(sorted(c.items())) for g, c in sorted(tally.unfinished.items())},
        "answers_without_verdict_by_reason": dict(sorted(tally.unjudgeable.items())),
        "queries_with_pairs": len({q.id for q, _, _ in pairs}),
        "queries_with_bon": len(bon),
        "queries_without_pairs": dict(sorted(tally.no_pair.items())),
        "queries_without_bon": dict(sorted(tally.no_bon.items())),
        "pairs_decided_by_safety": sum(_by_safety(a, b) for _, a, b in pairs),
        "loser_counts": {str(k): v for k, v in sorted(Counter(len(b.losers) for b in bon).items())},
        **{
            k: tally.counts[k]
            for k in (
                "duplicate_queries",
                "duplicate_responses",
                "answers_to_unknown_queries",
                "truncated_answers",
                "unfinished_answers",
                "answers_without_verdict",
                "answers_ordered_by_judge_only",
                "empty_answers",
                "unscored_answers",
                "identical_answers_merged",
            )
        },
        "scenarios": dict(sorted(per_scenario.items(), key=lambda kv: SCENARIO_ORDER[kv[0]])),
    }


def build_sets_batch(
    env: StageEnv,
    queries: Sequence[Query],
    responses: Sequence[Response],
    scores: Sequence[JudgeScore],
    labels: Sequence[GuardLabel],
) -> StageResult[SetsResult]:
    built = build_sets(queries, responses, scores, labels, env.section)
    return StageResult(built, stats=built.stats)


async def sets_of_batch(run: BuildRun, batch: Batch) -> None:
    """The batch's pairwise and BoN items from its answers, the judge's scores and the guard's labels (the
    prompts' verdicts set the queries' harm categories first), kept with the run (``run.keep_sets``) and counted
    in its accounting; a dry run's are the stages on items' input only."""
    scores = batch.outcomes[JUDGE_STAGE].value.records
    labels = batch.outcomes[GUARD_STAGE].value.records
    queries = apply_prompt_scenarios(batch.queries, labels)
    built = batch.outcomes[SPEC.name] = run.call(SPEC, queries, batch.answers, scores, labels)
    batch.sets = sets = built.value.records
    if not run.planning:
        run.keep_sets(batch.index, sets)
        run.acc.add_batch(queries, batch.answers, scores, [*sets.pairwise, *sets.bon])


def count_items(run: BuildRun, flow: Flow, kept: list[StageResult[None]]) -> None:
    """The run summary's item counts, and the accounting's answers: requested (selected queries x generators)
    and failed."""
    counts = run.state.stage(SPEC.name).stats
    flow.result["pairwise"], flow.result["bon"] = counts.get("pairwise", 0), counts.get("bon", 0)
    failed = run.state.failure_counts().get(GENERATE_STAGE, 0)
    run.acc.finish(len(flow.selected) * len(run.cfg.generators), failed)


SPEC = StageSpec(
    "build_sets",
    build_sets_batch,
    config="sets",
    counts="answers",
    at=Position.SETS,
    on_batch=sets_of_batch,
    recorded=count_items,
)
