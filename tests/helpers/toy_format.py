"""A toy benchmark format, added through CONTRIBUTING's recipe ("Add an extension"): this one module,
which registers itself in ``BENCHMARK_FORMATS`` when imported (``tests/benchmarks/test_add_format.py``
imports it, and forgets it after). Its records are ``{"question", "good", "bad"}`` (and an optional
``topic``): one pairwise item each; its headline is the share of items won, a tie counting as wrong."""

from __future__ import annotations

from statistics import fmean
from typing import Any, Sequence

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.base import (
    BenchmarkFormat,
    BenchmarkRelease,
    Meta,
    Predictions,
    answer,
    conversation,
    encode_label,
    group_by,
    optional_name,
    text,
    with_uids,
    won,
)
from rmb_build.benchmarks.tables import Row
from rmb_build.core.items import PairwiseItem
from rmb_build.core.taxonomy import PAIRWISE_SET

FORMAT = "toybench"
OWN_FIELDS = ("question", "good", "bad")  # every record has them; no other format does
PROTOCOL = "rewardbench"  # the harness its authors would score with (any protocol of evaluate.protocols)


def build(rows: Sequence[Row], name: str) -> BenchmarkRelease:
    release = BenchmarkRelease.empty(name, FORMAT)
    for uid, row in with_uids(rows):
        topic = optional_name(row, "topic", "general")
        good = answer(row, "good_model", text(row, "good"), "good")
        bad = answer(row, "bad_model", text(row, "bad"), "bad")
        release.add(PairwiseItem(uid, conversation(row, "question"), good, bad, f"Toy/{encode_label(topic)}"))
        release.item_meta[(PAIRWISE_SET, uid)] = {"topic": topic}
    return release


def summary(predictions: Predictions, meta: Meta, ties: str) -> dict[str, Any]:
    topics = {t: fmean(won(p) for p in rows) for t, rows in group_by(predictions, meta, "topic").items()}
    return {"headline": fmean(won(p) for p in predictions), "topics": topics}


BENCHMARK_FORMATS.add(
    FORMAT, BenchmarkFormat(FORMAT, build, summary, title="ToyBench", own_fields=OWN_FIELDS, protocol=PROTOCOL)
)
