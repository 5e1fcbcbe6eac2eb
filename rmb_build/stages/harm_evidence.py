"""A harmlessness label needs evidence whose precision was measured.

A query classified into a harmlessness scenario keeps that goal only when the embedding classifier's
P(harm) (its summed probability of the 12 harmlessness scenarios) reaches the threshold measured on
held-out labelled prompts of the official RMB release (``harm_threshold.json``, made by
``bench/harm_threshold.py``): at it, 90% of the prompts called harmful were harmlessness prompts
there. Any other harmlessness label (a low-confidence guess, an LLM classifier's word) is turned away:
the query takes its most likely helpfulness scenario, and the count goes to the manifest. Goal
routing may still make it harmlessness on a readable ``unsafe`` verdict of the guard.

Precision depends on how common harmful prompts are: measured where about a third of the prompts are
harmful, it falls at lower base rates; ``measurement()`` carries the figures and the manifest and card
state them. In ShareGPT, where two LLM annotators found 2 of 400 random prompts harmful, 6 of the 112
prompts the classifier calls harmful are (the label set ``sharegpt-harm``): a build over such a corpus
should set ``classifier.harm_from_classifier: false`` and take its harmlessness queries from a label
set (a source's ``labels``: labels annotators gave, each set saying who they were), which is evidence as it is.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rmb_build.core.records import Query
from rmb_build.core.taxonomy import HARMLESSNESS, parse_scenario_id
from rmb_build.stages.classify import EmbeddingClassifier, build_classifier
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the run is the pipeline's, a layer above
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Flow

MEASUREMENT = "harm_threshold.json"
BELOW_THRESHOLD = "classifier's P(harm) below the measured threshold"
NOT_FROM_CLASSIFIER = "a classifier's call, not evidence in this build (classifier.harm_from_classifier: false)"


@lru_cache(maxsize=1)
def measurement() -> dict[str, Any]:
    """The shipped measurement: threshold, precision (with its interval), recall, precision at base rates."""
    return json.loads(resources.files(__package__).joinpath(MEASUREMENT).read_text(encoding="utf-8"))


def _is_harm(scenario_id: str | None) -> bool:
    return parse_scenario_id(scenario_id).goal == HARMLESSNESS if scenario_id else False


def require_evidence(
    queries: Sequence[Query], clf: EmbeddingClassifier, from_classifier: bool = True
) -> tuple[list[Query], dict[str, Any]]:
    """``queries`` with every harmlessness label lacking evidence replaced by the query's most likely
    helpfulness scenario, and what happened (``clf``: an EmbeddingClassifier). A label set's label
    (``Query.labelled_by``) is evidence; a classifier's harmlessness label is evidence at
    the measured threshold, and never with ``from_classifier`` False. Queries of other goals pass unchanged."""
    from rmb_build.stages.classify import classifier_text

    threshold = float(measurement()["threshold"])
    by_label_set = Counter(q.labelled_by for q in queries if q.labelled_by and _is_harm(q.scenario_id))
    harm_at = [i for i, q in enumerate(queries) if _is_harm(q.scenario_id) and not q.labelled_by]
    out, reasons = list(queries), Counter[str]()
    if harm_at:
        proba = clf.predict_proba([classifier_text(queries[i].conversation) for i in harm_at])
        harm_cols = np.array([_is_harm(label) for label in clf.labels])
        for i, row in zip(harm_at, proba):
            if from_classifier and row[harm_cols].sum() >= threshold:
                continue
            best = int(np.argmax(np.where(harm_cols, -1.0, row)))
            out[i] = dataclasses.replace(queries[i], scenario_id=clf.labels[best], confidence=float(row[best]))
            reasons[BELOW_THRESHOLD if from_classifier else NOT_FROM_CLASSIFIER] += 1
    kept = len(harm_at) - sum(reasons.values())
    return out, {
        "threshold": threshold,
        "classified_harmful": len(harm_at),
        "kept": kept,
        "turned_away": dict(reasons),
        "labelled_by_label_set": dict(by_label_set),
        "classifier_is_evidence": from_classifier,
    }


def unclassified(queries: Sequence[Query]) -> dict[str, Any]:
    """The counts of a build whose labels come from its sources (no classify stage): nothing turned away;
    the labels of label sets counted apart from the records' own."""
    harm = [q for q in queries if _is_harm(q.scenario_id)]
    return {
        "threshold": float(measurement()["threshold"]),
        "classified_harmful": 0,
        "kept": 0,
        "turned_away": {},
        "labelled_by_sources": sum(1 for q in harm if not q.labelled_by),
        "labelled_by_label_set": dict(Counter(q.labelled_by for q in harm if q.labelled_by)),
    }


def section(counts: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``harm_evidence``: this build's counts and the measurement they rest on."""
    m = measurement()
    return {
        **counts,
        "score": m["score"],
        "precision": m["precision"],
        "precision_ci95": m["precision_ci95"],
        "recall": m["recall"],
        "precision_at_base_rate": m["precision_at_base_rate"],
        "measured_on": m["release"],
        "measured_with": m["measured_with"],
        **_label_sets(counts.get("labelled_by_label_set") or {}),
    }


def _label_sets(names: dict[str, int]) -> dict[str, Any]:
    """``label_sets``: what each shipped label set behind this build's labels says of itself and measured."""
    from rmb_build.stages.sources.label_sets import load_label_set, shipped_names

    keep = ("corpus", "what", "annotated_by", "annotators", "measured")
    abouts = {n: load_label_set(n).about for n in names if n in shipped_names()}
    sets = {n: {k: about.get(k) for k in keep} for n, about in abouts.items()}
    return {"label_sets": sets} if sets else {}


__all__ = [
    "BELOW_THRESHOLD",
    "NOT_FROM_CLASSIFIER",
    "SPEC",
    "harm_evidence_batch",
    "measurement",
    "require_evidence",
    "section",
    "unclassified",
]


def harm_evidence_batch(env: StageEnv, queries: list[Query], classified: bool) -> StageResult[list[Query]]:
    """The stage's work: ``queries`` with classified harmlessness labels lacking evidence turned away, by the
    build's embedding classifier over the vectors classification stored (``env.store``), and the counts.
    Labels a source gave (``classified`` false: no classify stage) are the source's, and pass, as do a
    label set's (people's) labels."""
    if not classified:
        return StageResult(queries, stats=unclassified(queries))
    clf = build_classifier(env.section.train_release, env.embeddings, env.store)
    kept, counts = require_evidence(queries, clf, env.section.harm_from_classifier)
    return StageResult(kept, stats=counts)


async def turn_away_unevidenced(run: BuildRun, flow: Flow) -> None:
    """The pool less the harmlessness labels without evidence; the counts logged and kept for the manifest."""
    evidenced = run.call(SPEC, flow.take_queries(), flow.classified).value
    harm = dict(evidenced.stats)
    run.log.info(
        "harm evidence: %d classified harmful, %d kept (P(harm) >= %.2f), turned away %s",
        harm["classified_harmful"],
        harm["kept"],
        harm["threshold"],
        harm["turned_away"] or "none",
    )
    flow.queries = evidenced.records
    flow.checks[SPEC.name] = section(harm)


SPEC = StageSpec(
    "harm_evidence",
    harm_evidence_batch,
    config="classifier",
    encoder=True,
    cached=False,
    listed=False,
    at=Position.POOL,
    runs_with="gather",
    on_run=turn_away_unevidenced,
)
