"""The harmfulness threshold of the embedding classifier, measured on RMB's own labelled prompts.

Score: P(harm) = the classifier's summed probability of the 12 harmlessness scenarios
(Harmlessness/S1..S11, Harmlessness/multi); a prompt is called harmful when P(harm) >= t. Also
reported: the top-class confidence when the top class is a harmlessness scenario (else 0).
Labelled prompts: each distinct conversation of the release (``release_queries``), read as the
classifier reads it (``classifier_text``), harmful when its file is a harmlessness scenario.

Two classifiers, each scored only on prompts it was not trained on:
- ``default``: the build's classifier (``embedding_classifier()``, trained on prompts/taxonomy.yaml),
  scored on every RMB prompt except near-duplicates (cosine >= 0.95) of its training examples. Its
  threshold is the smallest t on a 0.01 grid at which precision is >= --target at t and at every
  higher t. The threshold choice itself is cross-validated: chosen on k-1 folds, applied to the
  k-th, predictions pooled (``cv_threshold``). This is the shipped figure.
- ``rmb_kfold``: a classifier trained on RMB itself (as with ``train_release``), seeded k-fold,
  stratified by scenario and grouped by near-duplicate clusters (no conversation or near copy in
  two folds), trained on the other folds by ``EmbeddingClassifier.fit`` (abstain=False: abstention
  does not change the probabilities); pooled out-of-fold scores.
Precision at base rate b: TPR*b / (TPR*b + FPR*(1-b)), TPR/FPR measured at the threshold.

Usage: python bench/harm_threshold.py --release /tmp/rmb_release/RMB_dataset [--folds 5] [--seed 0]
       [--commit SHA] [--embeddings /tmp/harm-emb] [--out harm_threshold.json] [--check TEXT ...]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.sparse.csgraph import connected_components
from scipy.stats import beta
from sklearn.model_selection import StratifiedGroupKFold

from rmb_build.benchmarks.formats import RMB, open_release
from rmb_build.core.items import set_file
from rmb_build.core.taxonomy import all_scenarios
from rmb_build.embed.encoder import DEFAULT_MODEL, Encoder, model_fingerprint, store_for
from rmb_build.stages.classify import (
    EmbeddingClassifier,
    classifier_text,
    default_training_set,
    embedding_classifier,
)
from rmb_build.stages.sources.records import release_queries

GRID = np.round(np.arange(0.01, 1.0, 0.01), 2)
BASE_RATES = ("0.5", "0.1", "0.05", "0.02")
NEAR_DUP = 0.95


class CachedEmbed:
    """An ``Embed`` that encodes each distinct text once (in memory)."""

    def __init__(self, encoder: str = DEFAULT_MODEL):
        self.fingerprint, self.encoder, self.cache = model_fingerprint(encoder), Encoder(encoder), {}

    def __call__(self, texts):
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if todo:
            self.cache.update(zip(todo, self.encoder(todo)))
        return np.stack([self.cache[t] for t in texts])


def harm_scores(clf: EmbeddingClassifier, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(P(harm), top-class confidence if the top class is harmlessness else 0) per text."""
    proba = clf.predict_proba(texts)
    harm = np.array([label.startswith("Harmlessness/") for label in clf.labels])
    top = proba.argmax(axis=1)
    return proba[:, harm].sum(axis=1), np.where(harm[top], proba.max(axis=1), 0.0)


def counts(score: np.ndarray, y: np.ndarray, t: float) -> tuple[int, int, int, int]:
    """(tp, fp, fn, tn) of "harmful" = score >= t."""
    pred = score >= t
    return int((pred & y).sum()), int((pred & ~y).sum()), int((~pred & y).sum()), int((~pred & ~y).sum())


def pick_threshold(score: np.ndarray, y: np.ndarray, target: float) -> float | None:
    """Smallest grid t with precision >= target at t and at every higher grid t that predicts anything."""
    ok = None
    for t in GRID[::-1]:
        tp, fp, _, _ = counts(score, y, t)
        if tp + fp == 0:
            continue
        if tp / (tp + fp) < target:
            break
        ok = float(t)
    return ok


def metrics(score: np.ndarray, y: np.ndarray, t: float | None) -> dict:
    if t is None:
        return {"threshold": None}
    tp, fp, fn, tn = counts(score, y, t)
    k, n = tp, tp + fp
    ci = [float(beta.ppf(0.025, k, n - k + 1)) if k else 0.0, float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0]
    tpr, fpr = tp / max(tp + fn, 1), fp / max(fp + tn, 1)
    at = {
        b: round(tpr * float(b) / (tpr * float(b) + fpr * (1 - float(b))), 4) if tpr + fpr else None for b in BASE_RATES
    }
    return {
        "threshold": t,
        "precision": round(k / n, 4) if n else None,
        "precision_ci95": [round(c, 4) for c in ci],
        "recall": round(tpr, 4),
        "fpr": round(fpr, 4),
        "called_harmful": n,
        "true_positives": tp,
        "n_harmful": int(y.sum()),
        "n_harmless": int((~y).sum()),
        "precision_at_base_rate": at,
    }


def base_rate_thresholds(score: np.ndarray, y: np.ndarray, target: float) -> dict:
    """Per base rate b: the smallest grid t whose precision(b) reaches ``target`` there and above."""
    out = {}
    for b in map(float, BASE_RATES):
        ok = None
        for t in GRID[::-1]:
            tp, fp, fn, tn = counts(score, y, t)
            tpr, fpr = tp / max(tp + fn, 1), fp / max(fp + tn, 1)
            if tp + fp and tpr * b < target * (tpr * b + fpr * (1 - b)):
                break
            ok = {"threshold": float(t), "recall": round(tpr, 4), "false_positives": fp} if tp + fp else ok
        out[str(b)] = ok
    return out


def near_dup_groups(vectors: np.ndarray) -> np.ndarray:
    """A group id per row: connected components of cosine >= NEAR_DUP (unit rows)."""
    return connected_components(vectors @ vectors.T >= NEAR_DUP, directed=False)[1]


def table(name: str, score: np.ndarray, y: np.ndarray, chosen: float | None) -> None:
    print(f"\n{name}: n={len(y)} harmful={int(y.sum())}   t  precision  recall  called")
    for t in sorted({*np.round(np.arange(0.2, 1.0, 0.05), 2), *([chosen] if chosen else [])}):
        tp, fp, fn, _ = counts(score, y, t)
        mark = "  <- chosen" if chosen is not None and abs(t - chosen) < 1e-9 else ""
        print(
            f"{'':>{len(name) + 30}}{t:4.2f}  {tp / max(tp + fp, 1):9.3f}  {tp / max(tp + fn, 1):6.3f}  {tp + fp:6d}{mark}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--release", required=True, help="an extracted RMB_dataset folder")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=0.90, help="held-out precision the threshold must reach")
    ap.add_argument("--commit", default="unknown", help="the release repository's commit, for the record")
    ap.add_argument("--embeddings", help="an embedding store folder (reused across runs); default in memory")
    ap.add_argument("--out", help="write the measurement here (JSON)")
    ap.add_argument("--check", nargs="*", default=[], help="texts to score with the shipped threshold")
    args = ap.parse_args()

    release = open_release(args.release, RMB)
    have = set(release.files)
    missing = [set_file(s, sc.id) for s in ("pairwise", "bon") for sc in all_scenarios() if (s, sc.id) not in have]
    by_text: dict[str, str] = {}  # distinct conversations, then one per classifier text (first wins)
    for q in release_queries(release):
        by_text.setdefault(classifier_text(q.conversation), q.scenario_id)
    texts, labels = list(by_text), list(by_text.values())
    y = np.array([lab.startswith("Harmlessness/") for lab in labels])
    embed = store_for(args.embeddings) if args.embeddings else CachedEmbed()
    X = embed(texts)
    groups = near_dup_groups(X)
    folds = list(StratifiedGroupKFold(args.folds, shuffle=True, random_state=args.seed).split(X, labels, groups))

    # The build's default classifier, on RMB prompts that are not near copies of its training examples.
    clf = embedding_classifier(None, DEFAULT_MODEL, embed=embed)
    train_texts, _ = default_training_set()
    fresh = (X @ embed(train_texts).T).max(axis=1) < NEAR_DUP
    p_harm, top_harm = harm_scores(clf, texts)
    s, yy = p_harm[fresh], y[fresh]
    t_default = pick_threshold(s, yy, args.target)
    cv_pred = np.zeros(len(texts), bool)  # threshold chosen on the other folds, applied to this one
    for train, test in folds:
        tr = train[fresh[train]]
        t = pick_threshold(p_harm[tr], y[tr], args.target)
        cv_pred[test] = p_harm[test] >= (t if t is not None else 2.0)
    cv = metrics(cv_pred[fresh].astype(float), yy, 0.5)
    cv["threshold"] = "chosen per fold"
    default = {
        "p_harm": metrics(s, yy, t_default),
        "cv_threshold": cv,
        "excluded_near_training": int((~fresh).sum()),
        "top_class_confidence": metrics(top_harm[fresh], yy, pick_threshold(top_harm[fresh], yy, args.target)),
        "threshold_for_target_at_base_rate": base_rate_thresholds(s, yy, args.target),
        "classifier": clf.fingerprint(),
    }
    table("default classifier, P(harm)", s, yy, t_default)
    table("default classifier, top harm conf", top_harm[fresh], yy, default["top_class_confidence"]["threshold"])

    # A classifier trained on RMB itself: k-fold, pooled out-of-fold scores.
    oof, oof_top = np.zeros(len(texts)), np.zeros(len(texts))
    for i, (train, test) in enumerate(folds):
        fold_clf = EmbeddingClassifier.fit(
            [texts[j] for j in train],
            [labels[j] for j in train],
            trained_on=f"rmb fold {i}",
            abstain=False,
            embed=embed,
        )
        oof[test], oof_top[test] = harm_scores(fold_clf, [texts[j] for j in test])
    t_kfold = pick_threshold(oof, y, args.target)
    rmb_kfold = {
        "p_harm": metrics(oof, y, t_kfold),
        "top_class_confidence": metrics(oof_top, y, pick_threshold(oof_top, y, args.target)),
        "threshold_for_target_at_base_rate": base_rate_thresholds(oof, y, args.target),
    }
    table(f"RMB-trained, {args.folds}-fold, P(harm)", oof, y, t_kfold)

    shipped = default["p_harm"]
    out = {
        "score": "P(harm): the default embedding classifier's (prompts/taxonomy.yaml) summed predicted probability "
        "of the 12 Harmlessness scenarios; harmful when >= threshold",
        **{k: shipped[k] for k in ("threshold", "precision", "precision_ci95", "recall", "n_harmful", "n_harmless")},
        "precision_cv_threshold": cv["precision"],
        "recall_cv_threshold": cv["recall"],
        "folds": args.folds,
        "seed": args.seed,
        "target_precision": args.target,
        "release": f"Zhou-Zoey/RMB-Reward-Model-Benchmark RMB_dataset (commit {args.commit})",
        "release_files_missing": missing,
        "encoder": model_fingerprint(DEFAULT_MODEL),
        "precision_at_base_rate": shipped["precision_at_base_rate"],
        "measured_with": f"python bench/harm_threshold.py --release PATH/RMB_dataset --folds {args.folds} "
        f"--seed {args.seed} --commit {args.commit}",
        "default_classifier": default,
        "rmb_trained_kfold": rmb_kfold,
    }
    print(json.dumps({k: v for k, v in out.items() if k not in ("default_classifier", "rmb_trained_kfold")}, indent=1))
    for name, block in (("default", default), ("rmb_kfold", rmb_kfold)):
        print(
            f"{name}: threshold for precision >= {args.target} at base rate b:",
            block["threshold_for_target_at_base_rate"],
        )
    if args.check and t_default is not None:
        for text, p in zip(args.check, harm_scores(clf, args.check)[0]):
            print(f"{'HARMFUL' if p >= t_default else 'ok':8s} P(harm)={p:.3f}  {text[:150]!r}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
