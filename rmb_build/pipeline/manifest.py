"""The release manifest (``manifest.json``): what was built, from what, with which models and prompts.

``build_manifest`` fills the typed records of ``rmb_build.release.manifest_model`` (what the dataset card
reads) and returns their JSON. Holds no secret: endpoints are described by ``llm.endpoint`` (URLs without
user:password or query string), and API keys are only ever named by their environment variable.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from rmb_build import __version__
from rmb_build.core.items import Item, conversation_key
from rmb_build.core.paths import prompts_dir
from rmb_build.core.prompting import prompt_hash
from rmb_build.core.records import JudgeScore, Query, Response
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, parse_scenario_id
from rmb_build.llm.config import ModelRef
from rmb_build.llm.endpoint import endpoint_description, public_url
from rmb_build.pipeline.config import BuildConfig
from rmb_build.release.audit import digest
from rmb_build.release.manifest_model import CastSection, Manifest, SetFigures, SetsSection
from rmb_build.stages import sets as sets_stage
from rmb_build.stages.select import Selection
from rmb_build.stages.sets import CUT_AT_MAX_TOKENS, gap_histogram, per_query_histogram, unfinished
from rmb_build.stages.sources import source_for

if TYPE_CHECKING:
    from rmb_build.embed.store import EmbeddingStore

MANIFEST_SCHEMA_VERSION = 1
TRUNCATED_REASON = "cut at max_tokens (finish_reason=length): never in a release"


def public_config(cfg: BuildConfig) -> dict[str, Any]:
    """The config as JSON, with endpoint URLs stripped of credentials."""
    data = cfg.model_dump(mode="json", exclude_none=True)
    for ep in data.get("endpoints", {}).values():
        if "base_url" in ep:
            ep["base_url"] = public_url(ep["base_url"])
    return data


def prompt_hashes() -> dict[str, str]:
    """Hash of every prompt file shipped in ``prompts/`` (judge, guard, criteria, taxonomy)."""
    root = prompts_dir()
    return {
        p.relative_to(root).as_posix(): prompt_hash(p.relative_to(root).as_posix())
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".md", ".txt", ".yaml", ".json")
    }


class ReleaseFigures:
    """The manifest's figures of a release (``counts`` and ``sets``), fed one item at a time with its
    annotation (``annotations.jsonl``'s line, or None). Per distinct conversation and answer it keeps
    a digest, per item nothing."""

    def __init__(self) -> None:
        self.files: Counter = Counter()  # (set, scenario) -> items
        self.conversations: dict[str, Counter] = {PAIRWISE_SET: Counter(), BON_SET: Counter()}  # digest -> items
        self.answers: set[bytes] = set()
        self.gaps: dict[str, Counter] = {PAIRWISE_SET: Counter(), BON_SET: Counter()}  # judge-score gap -> times

    def add(self, item: Item, note: Mapping[str, Any] | None = None) -> None:
        set_name = item.set_name
        self.files[(set_name, item.scenario_id)] += 1
        conv = conversation_key(item.conversation)
        self.conversations[set_name][bytes.fromhex(conv)] += 1
        self.answers.update(
            digest(json.dumps([conv, a.llm_name, a.answer], ensure_ascii=False)) for a in item.answers()
        )
        n = note or {}
        if set_name == PAIRWISE_SET and "chosen_score" in n and "rejected_score" in n:
            self.gaps[set_name][n["chosen_score"] - n["rejected_score"]] += 1
        elif set_name == BON_SET and "best_score" in n:
            self.gaps[set_name].update(n["best_score"] - s for s in n.get("loser_scores", []))

    def counts(self) -> dict[str, Any]:
        """Items per set and scenario, per set and goal, distinct queries and answers."""
        per_scenario: dict[str, dict[str, int]] = {}
        per_goal: dict[str, Counter] = {}
        for (set_name, scenario_id), n in sorted(self.files.items()):
            per_scenario.setdefault(set_name, {})[scenario_id] = n
            per_goal.setdefault(set_name, Counter())[parse_scenario_id(scenario_id).goal] += n
        return {
            "items": {s: sum(v.values()) for s, v in per_scenario.items()},
            "per_goal": {s: dict(c) for s, c in per_goal.items()},
            "per_scenario": per_scenario,
            "queries": len(set().union(*self.conversations.values())),
            "answers": len(self.answers),
        }

    def sets(self, cfg: BuildConfig) -> SetsSection:
        """Per set: items per query (a histogram and the mean) and a histogram of the judge-score gaps
        (pairwise: chosen - rejected; BoN: best - each loser), from the items' annotations."""
        figures = {}
        for set_name in (PAIRWISE_SET, BON_SET):
            per_query = self.conversations[set_name]
            items = sum(per_query.values())
            figures[set_name] = SetFigures(
                items=items,
                queries=len(per_query),
                per_query=per_query_histogram(per_query.values()),
                mean_per_query=round(items / len(per_query), 3) if per_query else 0.0,
                score_gaps=gap_histogram(self.gaps[set_name].elements()),
            )
        return SetsSection(
            pair_policy=cfg.sets.pair_policy,
            max_pairs_per_query=cfg.sets.max_pairs_per_query,
            margin=cfg.sets.margin,
            unreadable_verdicts=cfg.sets.unreadable_verdicts,
            pairwise=figures[PAIRWISE_SET],
            bon=figures[BON_SET],
        )


def sources_section(cfg: BuildConfig, stats: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each configured source with its licence and what gather read, kept, filtered and quarantined."""
    per_source = list(stats.values())
    out = []
    for i, src in enumerate(cfg.sources):
        entry = {"kind": src.kind, "path": source_for(src).where(), "license": src.license or cfg.license}
        entry.update(per_source[i] if i < len(per_source) else {"read": 0, "kept": 0})
        out.append(entry)
    return out


def models_section(cfg: BuildConfig) -> dict[str, Any]:
    """Generators, judge and guard with the server behind each (the guard says when it is not Llama Guard)."""

    def ref(r: ModelRef) -> dict[str, Any]:
        return {
            **r.model_dump(mode="json", exclude_none=True),
            "server": endpoint_description(cfg.endpoints[r.endpoint]),
        }

    guard = ref(cfg.guard)
    if cfg.endpoints[cfg.guard.endpoint].embedded or "guard" not in cfg.guard.model.lower():
        guard["note"] = (
            f"guard labels come from {cfg.guard.model}, not a Llama Guard model: treat harmlessness labels as weak"
        )
    return {
        "generators": [{"llm_name": g.llm_name, **ref(g)} for g in cfg.generators],
        "judge": ref(cfg.judge),
        "guard": guard,
    }


def usage_section(usage: object) -> dict[str, Any]:
    """Token and cost totals from the LLM client's ``usage()``, made JSON-safe."""
    if usage is None:
        return {}
    if hasattr(usage, "to_json"):
        return usage.to_json()
    if hasattr(usage, "model_dump"):
        return usage.model_dump(mode="json")
    return dict(usage) if isinstance(usage, Mapping) else {"value": str(usage)}


def cast_section(cfg: BuildConfig) -> CastSection:
    """The preflight checks on the cast (judge vs generators, distinct generator models) and which the config relaxed."""
    return CastSection(
        distinct_generator_models=len({cfg.model_identity(g) for g in cfg.generators}),
        min_generators=cfg.min_generators,
        allow_self_judging=cfg.judge.allow_self_judging,
        relaxed=cfg.relaxed_cast(),
    )


EMBEDDING_FIGURES = ("requested", "encoded", "encode_seconds")


def embeddings_section(
    stages: Iterable[Mapping[str, Any]], store: EmbeddingStore, **more: Mapping[str, Any]
) -> dict[str, Any]:
    """A build's embedding figures. ``per_stage``: each stage's ``stats.embeddings`` (and ``more``, e.g.
    ``release``: the release's audit): texts it asked for (``requested``; ``distinct`` per batch),
    texts the store had to encode (``encoded``) and the seconds encoding took (``encode_seconds``: the
    encoder's own floor), for work done in this run (batches from the task cache ask for nothing). The totals
    sum them; ``distinct_texts`` is what the build's store (``store``) holds: in a fresh run folder, every
    distinct text the build embedded. ``embeds_per_distinct_text`` = encoded / distinct_texts (1.0: each
    text encoded once; a re-run that needs no new vector: 0)."""
    per_stage = {
        s["stage"]: dict(s["stats"]["embeddings"])
        for s in stages
        if isinstance((s.get("stats") or {}).get("embeddings"), Mapping)
    }
    per_stage.update({k: dict(v) for k, v in more.items()})
    total = {k: sum(part.get(k, 0) for part in per_stage.values()) for k in EMBEDDING_FIGURES}
    distinct = len(store)
    return {
        "fingerprint": store.fingerprint,
        "dtype": store.dtype.name,
        **total,
        "encode_seconds": round(total["encode_seconds"], 3),
        "distinct_texts": distinct,
        "embeds_per_distinct_text": round(total["encoded"] / distinct, 4) if distinct else None,
        "per_stage": per_stage,
    }


def build_manifest(
    cfg: BuildConfig,
    figures: ReleaseFigures,
    *,
    accounting: Accounting,
    stages: Iterable[Mapping[str, Any]],
    failures: Mapping[str, int],
    usage: object = None,
    audit: Mapping[str, Any] | None = None,
    checks: Mapping[str, Any] | None = None,
    embeddings: EmbeddingStore | None = None,
) -> dict[str, Any]:
    """The manifest of a built release (``figures``: its items, seen as written). ``accounting`` says where every gathered query and generated
    answer went (release, failures or a stats bucket with its reason). ``checks`` are the label
    checks' sections (``gold``: the judge against gold labels; ``routing``: goals from the guard).
    ``embeddings``: the build's embedding store as the release's audit used it (``embeddings_section``)."""
    stages = list(stages)
    return Manifest(
        schema_version=MANIFEST_SCHEMA_VERSION,
        name=cfg.name,
        built_with=f"rmb_build {__version__}",
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        counts=figures.counts(),
        accounting=accounting.to_json(),
        sources=accounting.sources,
        license=cfg.license,
        models=models_section(cfg),
        cast=cast_section(cfg),
        sets=figures.sets(cfg),
        prompts=prompt_hashes(),
        usage=usage_section(usage),
        stages=stages,
        embeddings=embeddings_section(stages, embeddings, release=embeddings.stats.to_json())
        if embeddings is not None and hasattr(embeddings, "stats")
        else None,
        failures={"total": sum(failures.values()), "per_stage": dict(failures)},
        audit=dict(audit or {}),
        checks=dict(checks or {}),
        config=public_config(cfg),
    ).to_json()


@dataclass
class Accounting:
    """Where every gathered query and every requested answer went. The buckets add up:
    ``gathered = dedup_removed + not_selected + selected`` and ``selected = in_release + not_in_release``;
    ``requested = failed + generated`` and ``generated = in_release + not_in_release``."""

    gathered: int = 0
    sources: list[dict[str, Any]] = field(default_factory=list)
    dedup_removed: dict[str, int] = field(default_factory=dict)
    not_selected: dict[str, int] = field(default_factory=dict)
    selected: int = 0
    queries_in_release: int = 0
    queries_not_in_release: dict[str, int] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    # goal -> wanted (select.min_per_goal), selected, with_evidence (in the pool)
    short_goals: dict[str, dict[str, int]] = field(default_factory=dict)

    def count_gathered(self, cfg: BuildConfig, gathered: int, stats: Mapping[str, Mapping[str, Any]]) -> None:
        """The queries gather kept, and each source with what gather read of it (``sources_section``)."""
        self.gathered, self.sources = gathered, sources_section(cfg, stats)

    def select(self, selection: Selection) -> None:
        """The selection's buckets: the selected queries, those not selected (by reason), the short goals."""
        self.selected, self.not_selected = len(selection.selected), selection.not_selected
        self.short_goals = selection.short_goals

    def fill(
        self,
        selected: Sequence[Query],
        responses: Sequence[Response],
        scores: Sequence[JudgeScore],
        items: Iterable[Any],
        generators: int,
        generate_failures: int,
    ) -> None:
        """Fill the query and answer buckets once the sets are built (all batches at once)."""
        self.selected, self.queries_in_release, self.queries_not_in_release, self.answers = len(selected), 0, {}, {}
        self.add_batch(selected, responses, scores, items)
        self.finish(len(selected) * generators, generate_failures)

    def add_batch(
        self,
        selected: Sequence[Query],
        responses: Sequence[Response],
        scores: Sequence[JudgeScore],
        items: Iterable[Any],
    ) -> None:
        """Add one batch of selected queries, with their answers, scores and built items, to the buckets."""
        used_answers: set[tuple[str, str]] = set()
        used_convs: set[str] = set()
        for it in items:
            ck = conversation_key(it.conversation)
            used_convs.add(ck)
            used_answers.update((ck, a.llm_name) for a in it.answers())
        conv_of = {q.id: conversation_key(q.conversation) for q in selected}
        answered = {r.query_id for r in responses}
        reasons: Counter = Counter(self.queries_not_in_release)
        for q in selected:
            if conv_of[q.id] in used_convs:
                self.queries_in_release += 1
            elif q.id not in answered:
                reasons["no answers (every generator failed: see failures.jsonl)"] += 1
            else:
                reasons[f"no pair or BoN item (see stages.{sets_stage.SPEC.name}.stats)"] += 1
        self.queries_not_in_release = dict(sorted(reasons.items()))  # batches finish in any order
        scored = {(s.query_id, s.generator) for s in scores}
        a = self.answers
        unused: Counter = Counter(a.get("not_in_release", {}))
        truncated: Counter = Counter(a.get("truncated_by_generator", {}))
        unfinished_by: dict[str, Counter] = {g: Counter(c) for g, c in a.get("unfinished_by_generator", {}).items()}
        in_release = a.get("in_release", 0)
        for r in responses:
            why = unfinished(r)
            if (conv_of.get(r.query_id), r.generator) in used_answers:
                in_release += 1
            elif why is not None:
                unused[TRUNCATED_REASON if why == CUT_AT_MAX_TOKENS else f"unfinished: {why}: never in a release"] += 1
                unfinished_by.setdefault(r.generator, Counter())[why] += 1
                if why == CUT_AT_MAX_TOKENS:
                    truncated[r.generator] += 1
            elif (r.query_id, r.generator) not in scored:
                unused["not scored by the judge (see failures.jsonl)"] += 1
            else:
                unused["in no item (score margin, identical text or loser cap)"] += 1
        self.answers = {
            "requested": a.get("requested", 0),
            "failed": a.get("failed", 0),
            "generated": a.get("generated", 0) + len(responses),
            "in_release": in_release,
            "not_in_release": dict(sorted(unused.items())),
            "truncated_by_generator": dict(sorted(truncated.items())),
            "unfinished_by_generator": {g: dict(sorted(c.items())) for g, c in sorted(unfinished_by.items())},
        }

    def finish(self, requested: int, generate_failures: int) -> None:
        """Set the answers requested (selected queries x generators) and failed, once every batch is added."""
        self.answers = {
            "requested": requested,
            "failed": generate_failures,
            **{k: v for k, v in self.answers.items() if k not in ("requested", "failed")},
        }
        self.answers.setdefault("generated", 0)
        self.answers.setdefault("in_release", 0)
        self.answers.setdefault("not_in_release", {})
        self.answers.setdefault("truncated_by_generator", {})
        self.answers.setdefault("unfinished_by_generator", {})

    def balanced(self) -> bool:
        """Whether the buckets add up (a build that loses track of items is a bug)."""
        q = self.gathered == sum(self.dedup_removed.values()) + sum(
            self.not_selected.values()
        ) + self.selected and self.selected == self.queries_in_release + sum(self.queries_not_in_release.values())
        a = self.answers
        if not a:
            return q
        return (
            q
            and a["requested"] == a["failed"] + a["generated"]
            and a["generated"] == a["in_release"] + sum(a["not_in_release"].values())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "queries": {
                "gathered": self.gathered,
                "dedup_removed": self.dedup_removed,
                "not_selected": self.not_selected,
                "selected": self.selected,
                "in_release": self.queries_in_release,
                "not_in_release": self.queries_not_in_release,
                "short_of_min_per_goal": self.short_goals,
            },
            "answers": self.answers,
            "balanced": self.balanced(),
        }
