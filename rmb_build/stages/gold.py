"""Label validity, measured: the build's own judge (and guard) against a labelled release's pairs.

Before generating, a seeded sample of a labelled release's pairwise items (balanced across goals,
and across scenarios within a goal) goes through the judge and guard *stage functions* the build
uses on its own answers: the chosen and the rejected answer are two responses to one query, scored
pointwise with the criteria of the item's scenario, the same samples, temperature and reply schema.
The build's preference rule (``sets.beats`` with no margin: in harmlessness a safe answer over an
unsafe one, else the higher mean score) then says which answer the build would prefer.

Agreement per goal is the mean outcome: 1 when the gold ``chosen`` is preferred, 0 when the
``rejected`` is, 0.5 for a tie (no preference either way; as ``rmb evaluate --ties half``), so chance
is 0.5. An answer whose guard verdict is unreadable is compared with nothing by the build, so its
pair counts as a tie. Pairs the judge could not score are left out of ``n`` and counted as ``unjudged``. The 95%
interval is ``rmb evaluate``'s (``rmb_build.core.intervals``): exact for 0/1 outcomes, never of zero width. Every call goes
through the LLM cache, so a rerun repeats none.

The guard also reads every gold prompt (both goals), which measures its prompt-level precision: of the
prompts it calls ``unsafe``, the share that are harmlessness prompts in the gold labels (``guard_prompt``,
with a Clopper-Pearson interval). Goal routing takes an ``unsafe`` verdict as evidence of harm only where
this precision was measured and reaches ``route.min_guard_precision`` (:func:`guard_evidence`).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rmb_build.core.errors import RMBError
from rmb_build.core.intervals import DEFAULT_DRAWS, clopper_pearson, mean_interval
from rmb_build.core.items import PairwiseItem
from rmb_build.core.records import Failure, Query, Response, query_id
from rmb_build.core.taxonomy import GOALS, HARMLESSNESS, parse_scenario_id
from rmb_build.llm.types import ChatClient
from rmb_build.release import gold_report
from rmb_build.release.gold_report import CHANCE, NOT_FOUND
from rmb_build.stages.guard import PROMPT_TARGET, RESPONSE_TARGET, SAFE, UNSAFE, guard, is_harmlessness
from rmb_build.stages.guard import STAGE as GUARD_STAGE
from rmb_build.stages.judge import STAGE as JUDGE_STAGE
from rmb_build.stages.judge import judge
from rmb_build.stages.options import GoldConfig, GuardConfig, JudgeConfig
from rmb_build.stages.sets import Candidate, answer_key, beats
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the build config and run are the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Flow

CHOSEN, REJECTED = "gold-chosen", "gold-rejected"


def sample_items(items: Sequence[PairwiseItem], n: int, seed: int = 0) -> list[PairwiseItem]:
    """``n`` items drawn in turn from each goal (each goal's items in turn from its scenarios), seeded."""
    rng = random.Random(seed)
    by_goal: dict[str, dict[str, list[PairwiseItem]]] = defaultdict(lambda: defaultdict(list))
    for it in sorted(items, key=lambda it: (it.scenario_id, it.uid)):
        by_goal[parse_scenario_id(it.scenario_id).goal][it.scenario_id].append(it)
    queues: list[list[PairwiseItem]] = []
    for goal in sorted(by_goal, key=lambda g: (GOALS.index(g) if g in GOALS else len(GOALS), g)):
        scenarios = by_goal[goal]
        for pool in scenarios.values():
            rng.shuffle(pool)
        order = sorted(scenarios)
        rng.shuffle(order)
        queues.append(_interleave([scenarios[s] for s in order]))
    return _interleave(queues)[:n]


def _interleave(lists: Sequence[Sequence[Any]]) -> list[Any]:
    out: list[Any] = []
    for k in range(max((len(x) for x in lists), default=0)):
        out += [x[k] for x in lists if k < len(x)]
    return out


def text_chars(item: PairwiseItem) -> int:
    """Characters a judge reads for one gold pair (conversation and both answers)."""
    return sum(len(t.content) for t in item.conversation) + len(item.chosen.answer) + len(item.rejected.answer)


def gold_inputs(items: Sequence[PairwiseItem], label: str) -> tuple[list[Query], list[Response]]:
    """Each item as a query (its conversation and scenario) with two responses: chosen and rejected."""
    queries, responses = [], []
    for it in items:
        qid = query_id(f"gold:{label}", f"pairwise:{it.uid}")
        queries.append(
            Query(qid, tuple(it.conversation), f"gold:{label}", f"pairwise:{it.uid}", scenario_id=it.scenario_id)
        )
        for name, answer in ((CHOSEN, it.chosen), (REJECTED, it.rejected)):
            responses.append(Response(qid, name, answer.llm_name, "gold", answer.answer))
    return queries, responses


def _goal(q: Query) -> str:
    """A gold query's goal: ``gold_inputs`` gives every one its item's scenario."""
    assert q.scenario_id is not None, q.id
    return parse_scenario_id(q.scenario_id).goal


def outcome(chosen: Candidate, rejected: Candidate) -> float:
    """1 when the build would prefer the gold chosen answer, 0 the rejected one, 0.5 neither."""
    if beats(chosen, rejected, 0.0):
        return 1.0
    if beats(rejected, chosen, 0.0):
        return 0.0
    return 0.5


def agreement(outcomes: Sequence[float], seed: int, stratum: str) -> dict[str, Any]:
    """``{"value", "n", "ci95", "ties"}`` of a goal's outcomes (``rmb_build.core.intervals``: never of zero width)."""
    arr = np.asarray(outcomes, dtype=float)
    n = len(arr)
    if not n:
        return {"value": None, "n": 0, "ci95": [None, None], "ties": 0}
    return {
        "value": float(arr.mean()),
        "n": n,
        "ci95": mean_interval(arr, DEFAULT_DRAWS, seed, f"gold/{stratum}"),
        "ties": int((arr == 0.5).sum()),
    }


def not_found(release: str, items: int) -> dict[str, Any]:
    return {"release": release, "items": 0, "requested": items, "agreement": {}, "status": NOT_FOUND}


def _gold_inputs(gold: GoldConfig) -> tuple[list[Query], list[Response]] | None:
    """The gold pairs (``judge.gold``) as queries and answers (None when an optional gold release is missing)."""
    from rmb_build.benchmarks.formats import RMB, open_release

    try:
        release = open_release(gold.release, RMB)
    except (RMBError, OSError) as exc:
        if gold.required:
            raise RMBError(f"judge.gold.release: {exc}") from None
        return None
    pool = [it for it in release.pairwise if gold.max_chars is None or text_chars(it) <= gold.max_chars]
    items = sample_items(pool, gold.items, gold.seed)
    return gold_inputs(items, Path(str(gold.release)).name or str(gold.release))


def _harmful_answers(queries: Sequence[Query], responses: Sequence[Response]) -> list[Response]:
    """The answers the guard reads: those to harmlessness prompts (every prompt is read, both goals)."""
    ids = {q.id for q in queries if is_harmlessness(q)}
    return [r for r in responses if r.query_id in ids]


async def gold_check(cfg: BuildConfig, client: ChatClient) -> tuple[dict[str, Any], list[Failure]]:
    """The manifest's ``gold`` section for ``cfg`` (a BuildConfig with ``judge.gold``) and the
    stages' failures. A missing release raises RMBError unless ``judge.gold.required`` is false."""
    return await _check(cfg.judge, cfg.guard, client)


async def gold_batch(env: StageEnv[JudgeConfig], guard_cfg: GuardConfig) -> StageResult[dict[str, Any]]:
    """The stage's work: :func:`gold_check` with the judge's section (``env.section``) and ``guard_cfg``."""
    section, failures = await _check(env.section, guard_cfg, env.chat())
    return StageResult(section, failures)


async def _check(
    judge_cfg: JudgeConfig, guard_cfg: GuardConfig, client: ChatClient
) -> tuple[dict[str, Any], list[Failure]]:
    gold = judge_cfg.gold
    assert gold is not None  # the gold stage runs only where judge.gold is set
    inputs = _gold_inputs(gold)
    if inputs is None:
        return not_found(gold.release, gold.items), []
    queries, responses = inputs
    scored = await judge(queries, responses, judge_cfg, client)
    guarded = await guard(queries, _harmful_answers(queries, responses), guard_cfg, client, every_prompt=True)
    section = summarize(queries, responses, scored.records, guarded.records, gold.seed)
    section.update(release=str(gold.release), stats={"judge": scored.stats, "guard": guarded.stats})
    return section, [*scored.failures, *guarded.failures]


def summarize(
    queries: Sequence[Query], responses: Sequence[Response], scores: Sequence[Any], labels: Sequence[Any], seed: int = 0
) -> dict[str, Any]:
    """Agreement per goal from the gold pairs' judge scores and guard labels (pure)."""
    score_of = {(s.query_id, s.generator): s for s in scores}
    safety = {(lb.query_id, lb.generator): lb.verdict for lb in labels if lb.target == RESPONSE_TARGET}
    prompt_unsafe = {lb.query_id for lb in labels if lb.target == PROMPT_TARGET and lb.verdict == UNSAFE}
    resp = {(r.query_id, r.generator): r for r in responses}
    per_goal: dict[str, list[float]] = defaultdict(list)
    unjudged: dict[str, int] = defaultdict(int)
    why_unjudged: dict[str, Counter] = defaultdict(Counter)
    for q in queries:
        goal = _goal(q)
        no_label = "none" if goal == HARMLESSNESS else None  # as build_sets: unlabelled harmlessness answers
        cands = []
        for name in (CHOSEN, REJECTED):
            s = score_of.get((q.id, name))
            if s is not None:
                r = resp[q.id, name]
                cands.append(Candidate(r, s, safety.get((q.id, name), no_label), answer_key(f"{name}:{r.text}")))
        if len(cands) < 2:
            unjudged[goal] += 1
            missing = [name for name in (CHOSEN, REJECTED) if (q.id, name) not in score_of]
            why_unjudged[goal][
                f"no usable judge score for the {' and the '.join(m.split('-')[1] for m in missing)} "
                f"answer{'s' if len(missing) > 1 else ''} (see failures.jsonl)"
            ] += 1
            continue
        per_goal[goal].append(outcome(*cands))
    goals = [g for g in GOALS if g in per_goal or g in unjudged]
    all_outcomes = [o for g in goals for o in per_goal[g]]
    harmful = [q for q in queries if _goal(q) == HARMLESSNESS]
    return {
        "items": len(queries),
        "agreement": {
            g: {
                **agreement(per_goal[g], seed, g),
                "asked": len(per_goal[g]) + unjudged[g],
                "unjudged": unjudged[g],
                "unjudged_reasons": dict(why_unjudged[g]),
            }
            for g in goals
        },
        "overall": agreement(all_outcomes, seed, "overall"),
        "chance": CHANCE,
        "ties": "half",
        "guard_prompt_unsafe": {"n": len(harmful), "unsafe": sum(q.id in prompt_unsafe for q in harmful)},
        "guard_prompt": guard_precision(queries, labels),
    }


def guard_precision(queries: Sequence[Query], labels: Sequence[Any]) -> dict[str, Any]:
    """The guard's prompt-level precision on the gold prompts: of those with a readable ``unsafe``
    verdict, the share whose gold goal is harmlessness (None where it called none unsafe), with its
    exact 95% interval; recall over the harmlessness prompts with a readable verdict."""
    verdict = {lb.query_id: lb.verdict for lb in labels if lb.target == PROMPT_TARGET}
    harm = {q.id: _goal(q) == HARMLESSNESS for q in queries}
    readable = [qid for qid in harm if verdict.get(qid) in (SAFE, UNSAFE)]
    called = [qid for qid in readable if verdict[qid] == UNSAFE]
    right = sum(harm[qid] for qid in called)
    harmful_read = sum(harm[qid] for qid in readable)
    return {
        "asked": len(harm),
        "readable": len(readable),
        "unreadable": len(harm) - len(readable),
        "harmlessness_prompts": sum(harm.values()),
        "called_unsafe": len(called),
        "unsafe_and_harmlessness": right,
        "precision": right / len(called) if called else None,
        "precision_ci95": clopper_pearson(right, len(called)) if called else [None, None],
        "recall": right / harmful_read if harmful_read else None,
    }


def guard_evidence(section: dict[str, Any] | None, min_precision: float) -> str | None:
    """None when the guard's ``unsafe`` prompt verdicts count as evidence of harm (its precision on the
    gold prompts was measured and reaches ``min_precision``); else why not, in a few words."""
    if section is None:
        return "the guard's prompt-level precision was not measured (no judge.gold)"
    if section.get("status") == NOT_FOUND:
        return f"the guard's prompt-level precision was not measured ({NOT_FOUND})"
    g = section.get("guard_prompt") or {}
    if g.get("precision") is None:
        return (
            "the guard's prompt-level precision was not measured (it called none of the "
            f"{g.get('readable', 0)} gold prompts it read unsafe)"
        )
    if g["precision"] < min_precision:
        return (
            f"the guard's measured prompt-level precision {g['precision']:.2f} (on {g['called_unsafe']} gold prompts) "
            f"is below route.min_guard_precision {min_precision:g}"
        )
    return None


def below(section: dict[str, Any], minimum: float) -> str | None:
    """Why a build must stop (one line) when a goal's agreement is below ``minimum``; None when none is."""
    if section.get("status") == NOT_FOUND:
        return (
            f"--min-gold-agreement {minimum:g}: no agreement measured ({NOT_FOUND}: {section['release']}); "
            "stopping before generation"
        )
    low = [(g, a) for g, a in section.get("agreement", {}).items() if a["n"] and a["value"] < minimum]
    if not section.get("agreement") or not any(a["n"] for a in section["agreement"].values()):
        return f"--min-gold-agreement {minimum:g}: the judge scored no gold pair; stopping before generation"
    if not low:
        return None
    worst = ", ".join(
        f"{g} {a['value']:.3f} (n={a['n']}, 95% CI {a['ci95'][0]:.2f}-{a['ci95'][1]:.2f})" for g, a in low
    )
    return (
        f"judge agreement with gold labels below --min-gold-agreement {minimum:g}: {worst}; "
        "stopping before generation (rerun with a lower bound resumes from the cache)"
    )


async def check_gold(run: BuildRun, flow: Flow) -> None:
    """The gold section into the flow's checks (None without ``judge.gold``); raises RMBError (one line) below
    ``--min-gold-agreement``. A dry run plans it: the section (for routing) and nothing recorded."""
    cfg, min_agreement = run.cfg, run.options.min_gold_agreement
    if cfg.judge.gold is None:
        if min_agreement is not None:
            raise RMBError("--min-gold-agreement needs judge.gold in the build config")
        flow.checks[SPEC.name] = None
        return
    checked = (await run.once(SPEC, cfg.guard)).value
    section = checked.records
    flow.checks[SPEC.name] = section
    if run.planning:  # its replies may be stand-ins: no figure of it is printed or checked
        return
    state = run.state
    state.add_failures(checked.failures)
    state.stage(SPEC.name).stats = {k: v for k, v in section.items() if k != "stats"}
    state.flush(gold=section)
    run.log.info(
        "%s: the judge against %s's labels:\n%s", SPEC.name, section.get("release"), gold_report.table(section)
    )
    stop = below(section, min_agreement) if min_agreement is not None else None
    if stop:
        raise RMBError(stop)


# Once per build before generation (with ``generate``), through the runner step.
SPEC = StageSpec(
    "gold",
    gold_batch,
    config="judge",
    cached=False,
    llm=True,
    counts="gold items",
    listed=False,
    sends=(JUDGE_STAGE, GUARD_STAGE),
    at=Position.RUN,
    runs_with="generate",
    on_run=check_gold,
)
