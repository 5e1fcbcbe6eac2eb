"""How well a classifier recovers a labelled release's goals, tasks and scenarios."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Sequence

from rmb_build.core.records import Query
from rmb_build.core.taxonomy import parse_scenario_id
from rmb_build.stages.classify import Classifier, EmbeddingClassifier
from rmb_build.stages.sources.records import release_queries

if TYPE_CHECKING:
    from rmb_build.release.read import Release

ABSTAINED = "<abstained>"
NONE = "<none>"


def _task(scenario_id: str) -> str:
    sc = parse_scenario_id(scenario_id)
    return sc.task_id or sc.id  # harmlessness scenarios count as their own task


def _confusion(pairs: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = defaultdict(Counter)
    for truth, pred in pairs:
        out[truth][pred] += 1
    return {t: dict(c.most_common()) for t, c in sorted(out.items())}


def _acc(pairs: list[tuple[str, str]], answered_only: bool) -> float | None:
    kept = [(a, b) for a, b in pairs if b != ABSTAINED] if answered_only else pairs
    return round(sum(a == b for a, b in kept) / len(kept), 4) if kept else None


def evaluate_classifier(
    release: Release, clf: Classifier | None = None, queries: Sequence[Query] | None = None
) -> dict[str, Any]:
    """Classify every distinct conversation of ``release`` (or the given labelled ``queries``; default
    classifier: the offline one trained on ``prompts/taxonomy.yaml``, never on the release) and score
    it against the labels.

    ``goal_accuracy``, ``task_accuracy`` and ``scenario_accuracy`` are over the ``answered`` queries
    (where the classifier did not abstain); the ``*_accuracy_all`` figures count abstentions as wrong.
    Also ``n``, ``abstained``, ``abstention_rate``, ``threshold`` (the classifier's, when it has one),
    ``per_scenario`` and ``confusion`` (``scenario``/``task``/``goal``: true label -> predicted label
    -> count, with ``<abstained>`` and ``<none>`` as predicted labels).
    """
    clf = clf or EmbeddingClassifier.default()
    queries = release_queries(release) if queries is None else list(queries)
    preds = clf.predict(queries)
    truth = [q.scenario_id or "" for q in queries]
    guess = [p.scenario_id or (ABSTAINED if p.abstained else NONE) for p in preds]

    def keep(f):
        return lambda s: s if s in (ABSTAINED, NONE) else f(s)

    levels = {"scenario": lambda s: s, "task": keep(_task), "goal": keep(lambda s: parse_scenario_id(s).goal)}
    pairs = {lvl: [(f(t), f(g)) for t, g in zip(truth, guess)] for lvl, f in levels.items()}
    n, abstained = len(queries), guess.count(ABSTAINED)

    per_scenario = {}
    for sid in sorted(set(truth)):
        idx = [i for i, t in enumerate(truth) if t == sid]
        per_scenario[sid] = {
            "n": len(idx),
            "abstained": sum(guess[i] == ABSTAINED for i in idx),
            "accuracy": _acc([pairs["scenario"][i] for i in idx], True),
            "task_accuracy": _acc([pairs["task"][i] for i in idx], True),
            "goal_accuracy": _acc([pairs["goal"][i] for i in idx], True),
        }
    fingerprint = getattr(clf, "fingerprint", None)
    report = {
        "schema_version": 2,
        "release": release.name,
        "classifier": fingerprint() if callable(fingerprint) else type(clf).__name__,
        "threshold": getattr(clf, "threshold", None),
        "n": n,
        "answered": n - abstained,
        "abstained": abstained,
        "abstention_rate": round(abstained / n, 4) if n else None,
    }
    for lvl in ("goal", "task", "scenario"):
        report[f"{lvl}_accuracy"] = _acc(pairs[lvl], True)
    for lvl in ("goal", "task", "scenario"):
        report[f"{lvl}_accuracy_all"] = _acc(pairs[lvl], False)
    report["per_scenario"] = per_scenario
    report["confusion"] = {lvl: _confusion(ps) for lvl, ps in pairs.items()}
    return report
