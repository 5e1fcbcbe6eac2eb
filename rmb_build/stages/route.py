"""Goal routing by the guard: a query's goal (and harm category) from its prompt's guard verdict.

RMB's harmlessness scenarios are Llama Guard 2's categories of the prompt, so the guard, not the
classifier, decides whether a query is harmlessness:

- a readable ``unsafe`` verdict makes the query harmlessness; its S-file comes from the verdict's
  categories (several -> ``multi``); with no readable category, the classifier's most likely
  harmlessness scenario;
- a readable ``safe`` verdict on a query the classifier calls harmlessness moves it to its most
  likely helpfulness scenario (``safe_harmful: helpfulness``) or drops it (``drop``), counted;
- a ``safe`` verdict on a helpfulness query confirms it;
- no readable verdict (a failed call, or a reply the parser cannot read): the classifier's label stands;
- a guard whose replies are mostly unreadable routes nothing: a verdict from it counts for no query (the
  classifier's or label set's scenario stands), counted (``unreadable`` of ``guard_replies``) and said in
  one line (``stopped``);
- a label people gave (a source's label set, ``Query.labelled_by``) stands whatever the verdict:
  a person's label is the evidence the guard's would be measured against.

An ``unsafe`` verdict counts only from a guard whose prompt-level precision was measured on gold prompts
and reaches ``route.min_guard_precision`` (``gold.guard_evidence``); otherwise it is read as no verdict
and counted (``unsafe_not_evidence``), so no query becomes harmlessness on an unmeasured guard's word.

Each routed query records ``goal_from`` (``guard``, ``classifier`` or ``label_set``) and ``category_from`` for its
annotations. The most likely scenario of a goal is the embedding classifier's most probable class
among that goal's scenarios (``alternatives``): the LLM classifier names one scenario only, so its
builds use the embedding classifier for this too.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from rmb_build.core import paths as P
from rmb_build.core.records import GuardLabel, Query
from rmb_build.core.taxonomy import GOALS, HARMLESSNESS, HELPFULNESS, parse_scenario_id
from rmb_build.llm.planning import PlanningClient
from rmb_build.stages.classify import EmbeddingClassifier, build_classifier
from rmb_build.stages.flow import ReleaseNote
from rmb_build.stages.gold import SPEC as GOLD_SPEC
from rmb_build.stages.gold import guard_evidence
from rmb_build.stages.guard import PROMPT_TARGET, SAFE, UNSAFE, guard
from rmb_build.stages.guard import STAGE as GUARD_STAGE
from rmb_build.stages.options import GuardConfig, SelectConfig
from rmb_build.stages.select import Selection, select, select_balanced, take_selection, write_selection
from rmb_build.stages.spec import Entry, Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the build config and run are the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Flow

GUARD, CLASSIFIER, LABEL_SET = "guard", "classifier", "label_set"


@dataclass(frozen=True)
class Decision:
    """How one query's scenario was decided (the fields go into its items' annotations)."""

    classifier_scenario: str | None
    scenario: str | None  # None: dropped
    verdict: str  # safe, unsafe, unknown, or "none" (no guard reply)
    goal_from: str
    category_from: str
    reason: str | None = None  # why it was dropped

    def to_json(self) -> dict[str, Any]:
        return {
            "goal_from": self.goal_from,
            "category_from": self.category_from,
            "classifier_scenario": self.classifier_scenario,
            "prompt_verdict": self.verdict,
        }


@dataclass
class Routing:
    kept: list[Query] = field(default_factory=list)
    decisions: dict[str, Decision] = field(default_factory=dict)
    dropped: Counter = field(default_factory=Counter)  # reason -> queries
    not_evidence: Counter = field(default_factory=Counter)  # why unsafe verdicts were not taken -> queries
    replies: int = 0  # prompt guard labels read (a failed call brings none)
    unreadable: int = 0  # of them, replies the parser could not read (verdict unknown)
    stopped: str | None = None  # why routing took no verdict (a guard whose replies are mostly unreadable)

    def extend(self, other: "Routing") -> None:
        self.kept += other.kept
        self.decisions.update(other.decisions)
        self.dropped.update(other.dropped)
        self.not_evidence.update(other.not_evidence)
        self.replies += other.replies
        self.unreadable += other.unreadable
        self.stopped = self.stopped or other.stopped

    def stats(self) -> dict[str, Any]:
        """Counts per verdict, per source of the goal, per change of scenario, and per drop reason."""
        ds = list(self.decisions.values())
        return {
            "guarded": len(ds),
            "verdicts": dict(Counter(d.verdict for d in ds)),
            "goal_from": dict(Counter(d.goal_from for d in ds if d.scenario)),
            "category_from": dict(Counter(d.category_from for d in ds if d.scenario)),
            "changed": dict(
                Counter(
                    change(d.classifier_scenario, d.scenario)
                    for d in ds
                    if d.scenario and change(d.classifier_scenario, d.scenario)
                )
            ),
            "dropped": dict(self.dropped),
            "unsafe_not_evidence": dict(self.not_evidence),
            "guard_replies": self.replies,
            "unreadable": self.unreadable,
            "stopped": self.stopped,
        }


def mostly_unreadable(unreadable: int, replies: int) -> str | None:
    """The one line saying routing stopped, when more than half of the guard's ``replies`` were unreadable."""
    if not replies or unreadable * 2 <= replies:
        return None
    return (
        f"routing stopped: {unreadable} of {replies} guard replies were unreadable, so no query's goal comes "
        "from the guard (each keeps its classifier's or label set's scenario)"
    )


def goal_of(scenario_id: str | None) -> str | None:
    return parse_scenario_id(scenario_id).goal if scenario_id else None


def change(before: str | None, after: str | None) -> str | None:
    """How routing changed a scenario: ``"Helpfulness -> Harmlessness"``, ``"harm category"``, or None."""
    if not before or not after or before == after:
        return None
    gb, ga = goal_of(before), goal_of(after)
    if gb != ga:
        return f"{gb} -> {ga}"
    return "harm category" if ga == HARMLESSNESS else "helpfulness scenario"


def decide(
    q: Query,
    label: GuardLabel | None,
    alternatives: Mapping[str, str | None],
    safe_harmful: str = "helpfulness",
    unsafe_not_evidence: str | None = None,
) -> Decision:
    """The routing decision for one classified query (see the module docstring).

    ``alternatives`` maps a goal to the query's most likely scenario of that goal; ``unsafe_not_evidence``:
    why an ``unsafe`` verdict does not count (None: it does)."""
    cls = q.scenario_id
    verdict = label.verdict if label is not None else "none"
    if q.labelled_by and cls:  # no classifier decided it: its annotation's classifier_scenario is None
        return Decision(None, cls, verdict, goal_from=LABEL_SET, category_from=LABEL_SET)
    if verdict not in (SAFE, UNSAFE) or (verdict == UNSAFE and unsafe_not_evidence):
        return Decision(cls, cls, verdict, goal_from=CLASSIFIER, category_from=CLASSIFIER)

    # From here the guard's verdict decides the goal; the category is the guard's only where it names one.
    def put(scenario: str | None, category_from: str = CLASSIFIER) -> Decision:
        return Decision(cls, scenario, verdict, goal_from=GUARD, category_from=category_from)

    def drop(reason: str) -> Decision:
        return Decision(cls, None, verdict, goal_from=GUARD, category_from=CLASSIFIER, reason=reason)

    if verdict == UNSAFE:
        assert label is not None  # a verdict comes with its label
        if label.scenario_id:
            return put(label.scenario_id, category_from=GUARD)
        harmful = cls if goal_of(cls) == HARMLESSNESS else alternatives.get(HARMLESSNESS)
        if harmful:
            return put(harmful)
        return drop("guard: unsafe prompt without a readable category, and no harmlessness scenario to put it in")
    if goal_of(cls) != HARMLESSNESS:
        return put(cls)
    if safe_harmful == "drop":
        return drop("guard: 'safe' prompt the classifier called harmful (dropped: route.safe_harmful)")
    helpful = alternatives.get(HELPFULNESS)
    if helpful:
        return put(helpful)
    return drop("guard: 'safe' prompt the classifier called harmful, and no helpfulness scenario to put it in")


def route(
    queries: Sequence[Query],
    labels: Iterable[GuardLabel],
    alternatives: Mapping[str, Mapping[str, str | None]],
    safe_harmful: str = "helpfulness",
    unsafe_not_evidence: str | None = None,
) -> Routing:
    """Classified ``queries`` with their scenario decided by their prompt's guard label (pure).

    ``alternatives``: query id -> {goal: most likely scenario of that goal}; queries routed away
    from their goal without one are dropped, with the reason counted. ``unsafe_not_evidence``: see
    :func:`decide`; each unsafe verdict it sets aside is counted under it. When most of the prompts' guard
    replies are unreadable (:func:`mostly_unreadable`), no verdict is taken: ``stopped`` says so."""
    by_query = {lb.query_id: lb for lb in labels if lb.target == PROMPT_TARGET}
    out = Routing()
    replies = [by_query[qid] for qid in dict.fromkeys(q.id for q in queries) if qid in by_query]
    out.replies = len(replies)
    out.unreadable = sum(1 for lb in replies if lb.verdict not in (SAFE, UNSAFE))
    out.stopped = mostly_unreadable(out.unreadable, out.replies)
    for q in queries:
        label = by_query.get(q.id)
        d = decide(q, None if out.stopped else label, alternatives.get(q.id, {}), safe_harmful, unsafe_not_evidence)
        if out.stopped and label is not None:  # the annotation still shows what the guard said
            d = dataclasses.replace(d, verdict=label.verdict)
        out.decisions[q.id] = d
        if d.verdict == UNSAFE and unsafe_not_evidence and not out.stopped:
            out.not_evidence[unsafe_not_evidence] += 1
        if d.scenario is None:
            out.dropped[d.reason or "dropped by routing"] += 1
        else:
            out.kept.append(q if d.scenario == q.scenario_id else dataclasses.replace(q, scenario_id=d.scenario))
    return out


def needs_alternatives(
    queries: Sequence[Query], labels: Iterable[GuardLabel], unsafe_not_evidence: str | None = None
) -> list[Query]:
    """The queries whose routing may need another goal's most likely scenario (so only those are scored)."""
    by_query = {lb.query_id: lb for lb in labels if lb.target == PROMPT_TARGET}
    out = []
    for q in queries:
        lb = by_query.get(q.id)
        if q.labelled_by and q.scenario_id:  # a person's label stands (decide)
            continue
        harmful = goal_of(q.scenario_id) == HARMLESSNESS
        if lb is not None and (
            (lb.verdict == SAFE and harmful)
            or (lb.verdict == UNSAFE and not lb.scenario_id and not harmful and not unsafe_not_evidence)
        ):
            out.append(q)
    return out


def alternatives_from(clf: EmbeddingClassifier, queries: Sequence[Query]) -> dict[str, dict[str, str | None]]:
    """query id -> {goal: the classifier's most probable scenario of that goal} (an EmbeddingClassifier)."""
    from rmb_build.stages.classify import classifier_text

    if not queries:
        return {}
    proba = clf.predict_proba([classifier_text(q.conversation) for q in queries])
    goals = [parse_scenario_id(label).goal for label in clf.labels]  # its labels are scenario ids, none empty
    out: dict[str, dict[str, str | None]] = {}
    for q, row in zip(queries, proba):
        best: dict[str, tuple[float, str]] = {}
        for label, goal, p in zip(clf.labels, goals, row):
            if goal not in best or p > best[goal][0]:
                best[goal] = (float(p), label)
        out[q.id] = {g: lab for g, (_, lab) in best.items()}
    return out


def routing_fields(note: Mapping[str, Any], decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """An annotation line's routing fields: its query's decision; ``goal_from: classifier`` for
    queries never routed."""
    d = decisions.get(note.get("query_id", ""))
    return d.to_json() if d is not None else {"goal_from": CLASSIFIER, "category_from": CLASSIFIER}


class ItemSummary:
    """Items whose goal / category came from the guard or the classifier alone, and where the two
    disagreed (the classifier's scenario against the release's), for the manifest and card.
    ``counts`` is filled in place by ``add``, so it can be handed on before the items stream by."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter] = {"goal_from": Counter(), "category_from": Counter(), "disagreed": Counter()}

    def add(self, note: Mapping[str, Any]) -> Mapping[str, Any]:
        """Count one annotation line; returns it."""
        self.counts["goal_from"][note.get("goal_from", CLASSIFIER)] += 1
        self.counts["category_from"][note.get("category_from", CLASSIFIER)] += 1
        diff = change(note.get("classifier_scenario"), note.get("scenario"))
        if diff:
            self.counts["disagreed"][diff] += 1
        return note


__all__ = [
    "Decision",
    "ItemSummary",
    "Routing",
    "alternatives_from",
    "change",
    "decide",
    "mostly_unreadable",
    "needs_alternatives",
    "route",
    "routing_fields",
]


@dataclass(frozen=True)
class Settings:
    """What routing reads of the build config besides its own section (``route:``, ``env.section``)."""

    guard: GuardConfig
    select: SelectConfig
    scenarios: list[str] | None  # the build's ``scenarios:`` (None: every scenario)
    train_release: str | None
    selected_file: str  # where the routed selection is written

    @classmethod
    def of(cls, cfg: BuildConfig, selected_file: str) -> "Settings":
        return cls(cfg.guard, cfg.select, cfg.scenarios, cfg.classifier.train_release, selected_file)


@dataclass
class Routed:
    """What goal routing decided: the selection after it (``select.Selection``), the routing itself
    (decisions per query, for the annotations), and how many pool queries top-up rounds could still draw
    (``top_up_room``: a dry run's bound where it cannot know the verdicts)."""

    selection: Selection
    routing: Routing
    top_up_room: int = 0


async def _guard_and_route(
    env: StageEnv, the: Settings, queries: Sequence[Query], not_evidence: str | None
) -> tuple[Routing, list[Any]]:
    """The routing of ``queries`` by their prompts' guard verdicts, and the guard's failures."""
    labels = await guard(queries, [], the.guard, env.chat(), every_prompt=True)
    read = [lb for lb in labels.records if lb.target == PROMPT_TARGET]
    unreadable = mostly_unreadable(sum(1 for lb in read if lb.verdict not in (SAFE, UNSAFE)), len(read))
    unsure = [] if unreadable else needs_alternatives(queries, labels.records, not_evidence)
    alts = {}
    if unsure:  # the build's encoder and store: the same vectors classify saw, none encoded twice
        alts = alternatives_from(build_classifier(the.train_release, env.embeddings, env.store), unsure)
    routed = route(queries, labels.records, alts, env.section.safe_harmful, not_evidence)
    if the.scenarios is not None:  # routing may move a query out of the scenarios the build is limited to
        kept = [q for q in routed.kept if q.scenario_id in the.scenarios]
        routed.dropped["routed to a scenario not in the config's 'scenarios'"] += len(routed.kept) - len(kept)
        routed.kept = kept
    return routed, list(labels.failures)


def _pool(queries: Sequence[Query], scenarios: Sequence[str] | None) -> list[Query]:
    return [q for q in queries if q.scenario_id and (scenarios is None or q.scenario_id in scenarios)]


async def route_batch(
    env: StageEnv,
    the: Settings,
    queries: Sequence[Query],
    selected: list[Query],
    not_selected: dict[str, int],
    gold: dict | None = None,
) -> StageResult[Routed]:
    """The stage's work: ``selected`` routed by their prompts' guard verdicts, from the classified
    ``queries``; ``gold``: the gold check's section, whose guard precision says whether an ``unsafe``
    verdict is evidence.

    With ``route.scope: selected`` (default) only the selected queries' prompts are guarded (one short
    call each); queries routed away are replaced by drawing from the rest of the classified pool (guarded
    and routed in turn, ``route.top_up_rounds`` times at most), so a build spends about one guard call per
    selected query instead of one per gathered prompt. ``scope: pool`` guards every classified prompt
    first and selects from the routed pool (balance exactly as configured; cost grows with the pool)."""
    cfg, sel = env.section, the.select
    failures: list[Any] = []
    not_evidence = guard_evidence(gold, cfg.min_guard_precision)
    if cfg.scope == "pool":
        pool = _pool(queries, the.scenarios)
        routing, failed = await _guard_and_route(env, the, pool, not_evidence)
        failures += failed
        in_pool = {q.id for q in pool}
        others = [q for q in queries if q.id not in in_pool]
        selected, not_selected = select([*others, *routing.kept], sel, the.scenarios)
        room = 0
    else:
        routing, failed = await _guard_and_route(env, the, selected, not_evidence)
        failures += failed
        considered = {q.id for q in selected}
        want = {g: min(sel.min_per_goal, n) for g, n in Counter(goal_of(q.scenario_id) for q in selected).items()}
        for _ in range(cfg.top_up_rounds):
            have = Counter(goal_of(q.scenario_id) for q in routing.kept)
            short = {g: max(0, want.get(g, 0) - have[g]) for g in GOALS}
            total = max(len(selected) - len(routing.kept), sum(short.values()))
            rest = [q for q in _pool(queries, the.scenarios) if q.id not in considered]
            if total <= 0 or not rest:
                break
            draw = select_balanced(rest, total=total, min_per_goal=short, per_scenario=sel.per_scenario, seed=sel.seed)
            if not draw:
                break
            considered.update(q.id for q in draw)
            more, failed = await _guard_and_route(env, the, draw, not_evidence)
            routing.extend(more)
            failures += failed
        not_selected = _moved_to_considered(not_selected, len(considered) - len(selected))
        room = sum(1 for q in _pool(queries, the.scenarios) if q.id not in considered) if cfg.top_up_rounds else 0
        selected = routing.kept
    for reason, n in routing.dropped.items():
        not_selected[f"routing: {reason}"] = not_selected.get(f"routing: {reason}", 0) + n
    selection = write_selection(selected, queries, not_selected, sel, the.scenarios, the.selected_file)
    return StageResult(Routed(selection, routing, room), failures)


def _moved_to_considered(not_selected: dict[str, int], topped_up: int) -> dict[str, int]:
    """``not_selected`` with ``topped_up`` queries taken out of the balanced-subset bucket (they were drawn)."""
    out = dict(not_selected)
    for key in out:
        if key.startswith("not selected") and topped_up:
            out[key] -= topped_up
            if not out[key]:
                del out[key]
            break
    return out


TOP_UP_ESTIMATE = "route_top_up_calls_at_most"


async def route_by_guard(run: BuildRun, flow: Flow) -> None:
    """The flow's selection routed by its prompts' guard verdicts, drawing top-ups from the classified pool; the
    gold check's section (in the flow's checks) says whether an ``unsafe`` verdict is evidence. Its failures and
    stats go to the run state and the log (not in a dry run: its verdicts may be stand-ins, and the top-up
    rounds they may cause are the plan's estimate)."""
    settings = Settings.of(run.cfg, str(run.paths.run / P.SELECTED_QUERIES))
    gold = flow.checks.get(GOLD_SPEC.name)
    done = (await run.once(SPEC, settings, flow.queries, flow.selected, dict(run.acc.not_selected), gold)).value
    routed = done.records
    if run.planning:
        planner = run.client
        assert isinstance(planner, PlanningClient)  # a dry run's client
        # a verdict the plan stood in for may route its query away: each could draw a replacement a round
        unknown = sum(1 for c in planner.calls.values() if c.phase == SPEC.name and c.cached is None)
        bound = min(unknown * run.cfg.route.top_up_rounds, routed.top_up_room)
        if bound:
            flow.estimates[TOP_UP_ESTIMATE] = bound
    else:
        _keep(run, done)
    take_selection(run, flow, routed.selection)
    flow.release_notes.append(_release_note(run.cfg.route.scope, routed.routing))


def _keep(run: BuildRun, done: StageResult[Routed]) -> None:
    """What the run keeps of routing: its failures, its stats, the log's lines."""
    state = run.state
    state.add_failures(done.failures)
    stats = done.records.routing.stats()
    state.stage(SPEC.name).stats = stats
    state.flush()
    run.log.info(
        "%s: %d prompts guarded; goal from guard %s; changed %s; dropped %s; unsafe verdicts not taken: %s",
        SPEC.name,
        stats["guarded"],
        stats["goal_from"].get("guard", 0),
        stats["changed"] or "none",
        stats["dropped"] or "none",
        stats["unsafe_not_evidence"] or "none",
    )
    if stats["stopped"]:
        run.log.warning("%s: %s", SPEC.name, stats["stopped"])


def _release_note(scope: str, routing: Routing) -> ReleaseNote:
    """``goal_from`` and the rest per item of the release (``routing_fields``), counted as the items stream by
    into the manifest's ``checks.routing``."""
    summary = ItemSummary()  # its counts fill in as the release is written, before the manifest

    def watch(entries: Iterator[Entry]) -> Iterator[Entry]:
        for item, note in entries:
            yield item, summary.add({**note, **routing_fields(note, routing.decisions)})

    return ReleaseNote("routing", {"scope": scope, "queries": routing.stats(), "items": summary.counts}, watch)


def _plan_note(estimates: Mapping[str, int], stand_ins: int) -> str:
    return "; goal routing's top-up rounds are not counted, see estimates" if TOP_UP_ESTIMATE in estimates else ""


# Once per build after selection (with ``guard``, where ``route.enabled``), through the runner step.
SPEC = StageSpec(
    "route",
    route_batch,
    config="route",
    encoder=True,
    cached=False,
    llm=True,
    counts="prompts",
    listed=False,
    sends=(GUARD_STAGE,),
    at=Position.RUN,
    runs_with="guard",
    when=lambda route_cfg: route_cfg.enabled,
    on_run=route_by_guard,
    plan_note=_plan_note,
)
