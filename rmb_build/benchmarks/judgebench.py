"""JudgeBench (Tan et al., ICLR 2025): one JSON line per pair, ``pair_id``, ``question``, ``response_A``,
``response_B``, ``label`` (``"A>B"`` or ``"B>A"``) and ``source`` (``mmlu-pro-law``, ``livebench-math``,
``livecodebench``, ...), as ScalerLab/JudgeBench's ``data/dataset=judgebench,response_model=*.jsonl`` ship.

Each row becomes one pairwise item (uid: its ``pair_id``), the labelled-better response as chosen; the
scenario is the row's category, the first of JudgeBench's source prefixes it starts with (``run_judge.py``'s
``mmlu-pro``, ``livebench-reasoning``, ``livebench-math``, ``livecodebench``, named as its paper names them:
knowledge, reasoning, math, coding), else its ``source`` as written. item_meta keeps the source, the
category and which position (A or B) the chosen response held.

The headline (``summary``), as ``utils/metrics.py``'s ``compute_final_metrics`` counts it, per category and
overall; every figure is micro, the share of the pairs counted correct (the authors' overall is
``compute_final_metrics`` over every pair, not a mean of the categories):

- a reward model (its predictions carry scores, no votes) scores each pair once; JudgeBench's reward-model
  judges (``utils/judges.py``) decide ``"A>B" if score_A > score_B else "B>A"``, so a tie is right exactly
  when the better response is B, whatever ``--ties`` says (``run_judge.py --single_game``);
- a judge (its predictions carry the votes of both orders) gets +1 for each order that picks the better
  response and -1 for each that picks the other; a pair is correct when the sum is positive, so an
  inconsistent pair (one order each way) is neither right nor wrong: it counts in the denominator only.

Intervals: mid-p (``core.intervals.mid_p``), every figure being a share of 0/1 outcomes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.base import (
    BenchmarkFormat,
    BenchmarkRelease,
    Meta,
    Predictions,
    encode_label,
    group_by,
    text,
)
from rmb_build.benchmarks.tables import Row
from rmb_build.core.intervals import mid_p
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.core.taxonomy import PAIRWISE_SET

FORMAT = "judgebench"
OWN_FIELDS = ("pair_id", "response_A", "response_B", "label")  # every record has them; no other format does
LABELS = {"A>B": "A", "B>A": "B"}
# run_judge.py's source prefixes, in its order, with the category its paper gives each.
CATEGORIES = {
    "mmlu-pro": "knowledge",
    "livebench-reasoning": "reasoning",
    "livebench-math": "math",
    "livecodebench": "coding",
}
AVERAGE = "micro: the share of all pairs counted correct, as compute_final_metrics over every pair"
TIE_RULE = (
    "a reward model's tie is right when the better response is B (JudgeBench: 'A>B' if score_A > score_B "
    "else 'B>A'), whatever --ties says; a judge's pair is right when more of its two orders pick the better "
    "response than the other (an inconsistent pair is neither right nor wrong)"
)


def category(source: str) -> str:
    """The category a source is reported in: the first JudgeBench prefix it starts with, else itself."""
    return next((name for prefix, name in CATEGORIES.items() if source.startswith(prefix)), source)


def build(rows: Sequence[Row], name: str) -> BenchmarkRelease:
    """JudgeBench rows as a release of pairwise items, one per row."""
    release = BenchmarkRelease.empty(name, FORMAT)
    seen: dict[str, str] = {}
    for row in rows:
        uid = text(row, "pair_id")
        if uid in seen:
            raise row.fail("pair_id", f"duplicate pair_id {uid!r} (also in {seen[uid]})")
        seen[uid] = row.file
        label = text(row, "label")
        if label not in LABELS:
            raise row.fail("label", f"expected 'A>B' or 'B>A', got {label!r}")
        question, source = text(row, "question"), text(row, "source")
        if not question.strip():
            raise row.fail("question", "empty question")
        model = row.data.get("response_model")
        model = model if isinstance(model, str) and model else "unknown"
        a, b = Answer(model, text(row, "response_A")), Answer(model, text(row, "response_B"))
        better = LABELS[label]
        chosen, rejected = (a, b) if better == "A" else (b, a)
        cat = category(source)
        release.add(PairwiseItem(uid, (Turn("user", question),), chosen, rejected, encode_label(cat)))
        release.item_meta[(PAIRWISE_SET, uid)] = {"source": source, "category": cat, "chosen_position": better}
    return release


def correct(prediction: Mapping[str, Any], chosen_position: str) -> float:
    """1 when JudgeBench counts the pair correct (see the module docstring), else 0."""
    if prediction.get("failed"):
        return 0.0
    chosen, rejected = prediction["scores"]["chosen"], prediction["scores"]["rejected"]
    if "votes" in prediction:  # a judge: chosen/rejected are the orders each side won
        return 1.0 if chosen > rejected else 0.0
    if chosen_position == "B":
        return 1.0 if chosen >= rejected else 0.0
    return 1.0 if chosen > rejected else 0.0


def _figure(predictions: Sequence[Mapping[str, Any]], meta: Meta) -> dict[str, Any]:
    hits = [correct(p, meta[(p["set"], p["uid"])]["chosen_position"]) for p in predictions]
    k, n = int(sum(hits)), len(hits)
    return {"accuracy": k / n, "interval": mid_p(k, n), "correct": k, "pairs": n}


def summary(predictions: Predictions, meta: Meta, ties: str) -> dict[str, Any]:
    """JudgeBench's accuracy per category and overall (see the module docstring); ``ties`` is not used:
    JudgeBench has its own rule."""
    if not predictions:
        return {"headline": None, "headline_reason": "no pairs", "tie_rule": TIE_RULE}
    groups = group_by(predictions, meta, "category")
    order = [c for c in CATEGORIES.values() if c in groups] + sorted(c for c in groups if c not in CATEGORIES.values())
    overall = _figure(predictions, meta)
    return {
        "headline": overall["accuracy"],
        "overall": overall,
        "sections": {c: _figure(groups[c], meta) for c in order},
        "average": AVERAGE,
        "tie_rule": TIE_RULE,
    }


BENCHMARK_FORMATS.add(
    FORMAT, BenchmarkFormat(FORMAT, build, summary, title="JudgeBench", own_fields=OWN_FIELDS, protocol=FORMAT)
)


__all__ = ["CATEGORIES", "FORMAT", "OWN_FIELDS", "build", "category", "correct", "summary"]
