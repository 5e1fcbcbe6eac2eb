"""``evaluate``: score a reward model against a release and write results.json, predictions.jsonl,
report.md and heatmap.png into one folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rmb_build.core.atomic import write_json, write_jsonl
from rmb_build.core.redact import redact_json
from rmb_build.evaluate.adapters import RewardModel
from rmb_build.evaluate.benchmarks import benchmark_fields
from rmb_build.evaluate.cache import ScoreCache
from rmb_build.evaluate.coverage import FULL, coverage_record
from rmb_build.evaluate.defects import audit_defects, split_items
from rmb_build.evaluate.length_control import length_control
from rmb_build.evaluate.metrics import DEFAULT_RESAMPLES, build_results
from rmb_build.evaluate.outcomes import length_bias, position_bias, predict
from rmb_build.evaluate.protocols import protocol, record
from rmb_build.evaluate.report import write_report
from rmb_build.evaluate.scoring import score_items
from rmb_build.evaluate.style import STYLE_PREDICTIONS, check_records, score_style, style_results, style_sha256
from rmb_build.release.provenance import release_record, release_sha256
from rmb_build.release.read import Release


def evaluate(
    release: Release,
    rm: RewardModel,
    out_dir: str | Path,
    cache_dir: str | Path,
    *,
    ties: str = "strict",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    release_label: str | None = None,
    progress: bool = True,
    audit: bool = True,
    skip_defective: bool = False,
    min_coverage: float = FULL,
) -> dict[str, Any]:
    """Evaluate ``rm`` on every item of ``release``; returns the results.json object it wrote.

    ``audit`` reports the release's defects (``release_defects``); ``skip_defective`` leaves the
    defective items out of scoring (``skipped_defective``: how many, per kind). Scores from a file that
    cover fewer than ``min_coverage`` of the items are refused (``coverage``).
    """
    content_sha256 = release_sha256(release)
    defects = audit_defects(release, cache_dir, content_sha256) if audit or skip_defective else None
    items, skipped = split_items(release, defects if skip_defective else None)
    extra: dict[str, Any] = {}
    if defects is not None:
        extra["release_defects"] = defects.to_json()
    if skipped is not None:
        extra["skipped_defective"] = skipped
    style_rows: list[dict[str, Any]] | None = None
    extra["protocol"] = (
        rm.protocol_record()
        if hasattr(rm, "protocol_record")
        else record(protocol(rm.options.protocol), max_length=None, truncation_side=None, overridden=[], applies=False)
    )
    if getattr(rm, "precomputed", False):  # scores from a file (adapters/scores.py): per item, no cache
        # a precomputed RM (adapters/scores.py) predicts items instead of scoring texts
        predictions, scoring, extra["scores_file"] = rm.predict_items(items, list(release.items()), ties)  # type: ignore[attr-defined]
        source = f"--scores {extra['scores_file']['path']}"
        extra["coverage"] = coverage_record(len(items), len(predictions), min_coverage, source)
        if release.style:
            extra["style"] = {"skipped": "scores from a file hold no scores of Style_set/'s texts"}
    else:
        if release.style:
            check_records(release.style, release.items())  # before any scoring: each record's item exists
        with ScoreCache(cache_dir) as cache:
            try:
                values, keys, stats = score_items(items, rm, cache, progress=progress)
                if release.style:
                    style_rows = score_style(
                        release.style, lambda its: score_items(its, rm, cache, progress=progress)[:2], rm.compares_pairs
                    )
            finally:
                rm.close()
        predictions = predict(items, keys, values, ties=ties, judge=rm.compares_pairs)
        scoring = stats.to_json()
        extra["coverage"] = coverage_record(len(items), len(predictions))
    if style_rows is not None:
        extra["style"] = {
            **style_results(style_rows, resamples, seed),
            "sha256": style_sha256(release.style),
        }
    extra["length_control"] = length_control(items, predictions, resamples, seed)
    bias: dict[str, Any] = {"length": length_bias([p for p in predictions if p["set"] == "pairwise"])}
    if rm.compares_pairs:
        bias["position"] = position_bias(predictions)
    results = build_results(
        predictions,
        rm=rm.spec,
        release=release_label or release.name,
        ties=ties,
        resamples=resamples,
        seed=seed,
        fingerprint=rm.fingerprint(),
        scoring=scoring,
        bias=bias,
        **extra,
    )
    results.update(benchmark_fields(release, predictions, ties))
    results["release_info"] = release_record(release, content_sha256)
    local = Path(release_label) if release_label is not None and Path(release_label).exists() else release.root
    if local is not None:
        # Where a later reader (rmb downstream's hold-out) finds the release from the results folder.
        results["release_info"]["path_from_results"] = os.path.relpath(Path(local).resolve(), Path(out_dir).resolve())
    if release.account is not None:  # the files read and skipped, with why
        results["release_read"] = release.account.to_json()
    if getattr(rm, "known_model", None) is not None:  # the known-models row whose settings it loaded with
        results["known_model"] = rm.known_model.to_json()  # type: ignore[attr-defined]  # what compare and leaderboard check before pairing
    results = redact_json(results)  # the spec is redacted already; so is whatever a label or origin carried
    out_dir = Path(out_dir)
    write_jsonl(out_dir / "predictions.jsonl", predictions)
    if style_rows is not None:
        write_jsonl(out_dir / STYLE_PREDICTIONS, style_rows)
    write_json(out_dir / "results.json", results)
    write_report(results, out_dir)
    return results
