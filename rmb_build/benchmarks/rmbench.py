"""RM-Bench (Liu et al., ICLR 2025): one row per prompt, ``prompt``, ``chosen`` and ``rejected`` each a list
of the same answer in three styles (concise, detailed plain text, detailed Markdown) and ``id``.

Its repository ships one file per domain (``chat_filtered.json``, ``code_filtered.json``,
``math_filtered.json``, ``safety-refuse_filtered.json``, ``safety-response_filtered.json``), whose rows
have no ``domain`` field, and ``total_dataset.json``, which merges them with one. A row's domain is its
``domain`` field, else its file's name without the suffix and a trailing ``_filtered`` (``chat``,
``safety-refuse``; a Hub row without the field is ``all``). Ids need only be unique within a domain.

Each row becomes nine pairwise items, one per cell (i, j) of the 3x3 matrix chosen[i] vs rejected[j].
A cell's difficulty is RM-Bench's: ``hard`` above the diagonal (i < j: a plainer correct answer against
a fancier wrong one), ``normal`` on it, ``easy`` below it. A domain is scored as the first of chat, math,
code, safety it starts with (so ``safety-refuse`` and ``safety-response`` are scored together as
``safety``, as RM-Bench does), else as itself. The scenario is ``<domain>/<difficulty>`` (the domain
encoded by ``benchmark.encode_label``), so the generic per-scenario figures already are RM-Bench's
per-domain hard / normal / easy accuracies. item_meta keeps the domain and any ``subset`` as written.

The headline (``summary``), as RM-Bench's ``compute_accuracy`` (``scripts/utils.py``) computes it: per domain,
hard / normal / easy accuracy and their mean, a tie counting as wrong whatever ``--ties`` says (its
``score_chosen > score_rejected``). A release with all of chat, math, code and safety (its
``total_dataset.json``) gets overall hard / normal / easy, each the mean over those four domains, and the
headline, the mean of their four domain means; another domain is reported per domain and left out of
these, as RM-Bench's script leaves it out. A release of one domain (one of its per-domain files) gets
that domain's hard / normal / easy as overall figures and no headline (RM-Bench computes none there);
any other mix gets neither.
"""

from __future__ import annotations

from pathlib import PurePath
from statistics import fmean
from typing import Any, Sequence

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.base import (
    BenchmarkFormat,
    BenchmarkRelease,
    Meta,
    Misfit,
    Predictions,
    answer,
    conversation,
    encode_label,
    group_by,
    optional_name,
    texts,
    with_uids,
    won,
)
from rmb_build.benchmarks.tables import Row
from rmb_build.core.items import Answer, PairwiseItem
from rmb_build.core.taxonomy import PAIRWISE_SET

FORMAT = "rm-bench"
STYLES = ("concise", "detailed_plain", "detailed_markdown")
DOMAINS = ("chat", "math", "code", "safety")
LEVELS = ("easy", "normal", "hard")
FILE_SUFFIX = "_filtered"  # RM-Bench's per-domain files: <domain>_filtered.json
HUB_DOMAIN = "all"
TIE_RULE = "a tie counts as wrong (RM-Bench: score_chosen > score_rejected), whatever --ties says"


def difficulty(i: int, j: int) -> str:
    """RM-Bench's difficulty of comparing chosen style ``i`` with rejected style ``j``."""
    return "hard" if i < j else "normal" if i == j else "easy"


def source_domain(row: Row) -> str:
    """The row's domain as its data names it: the ``domain`` field, else the name of the row's file."""
    if row.data.get("domain") is not None or row.table is None:
        return optional_name(row, "domain", HUB_DOMAIN)
    stem = PurePath(row.table).stem
    return stem[: -len(FILE_SUFFIX)] if stem.endswith(FILE_SUFFIX) and stem != FILE_SUFFIX else stem


def scored_domain(domain: str) -> str:
    """The domain a source domain is scored in: the first of chat/math/code/safety it starts with, else itself."""
    return next((d for d in DOMAINS if domain.startswith(d)), domain)


def domain_of(row: Row) -> str:
    """The domain the row is scored in."""
    return scored_domain(source_domain(row))


def _styled(row: Row, side: str) -> list[Answer]:
    """The row's three answers of ``side`` (chosen / rejected), styles in RM-Bench's order."""
    return [answer(row, f"{side}_model", a, f"{side}/{s}") for a, s in zip(texts(row, side, len(STYLES)), STYLES)]


def build(rows: Sequence[Row], name: str) -> BenchmarkRelease:
    """RM-Bench rows as a release of pairwise items, nine per row."""
    release = BenchmarkRelease.empty(name, FORMAT)
    for uid, row in with_uids(rows, scope=source_domain):
        source, conv = source_domain(row), conversation(row)
        domain = scored_domain(source)
        meta = {"domain": domain, "source_domain": source}
        if isinstance(row.data.get("subset"), str):
            meta["subset"] = row.data["subset"]
        chosen, rejected = _styled(row, "chosen"), _styled(row, "rejected")
        for i, good in enumerate(chosen):
            for j, bad in enumerate(rejected):
                item_uid, level = f"{uid}:{i}{j}", difficulty(i, j)
                release.add(PairwiseItem(item_uid, conv, good, bad, f"{encode_label(domain)}/{level}"))
                release.item_meta[(PAIRWISE_SET, item_uid)] = {**meta, "cell": [i, j], "level": level}
    return release


def summary(predictions: Predictions, meta: Meta, ties: str) -> dict[str, Any]:
    """RM-Bench's easy / normal / hard accuracy per domain and overall (see the module docstring); ``ties`` is
    not used: RM-Bench has its own rule."""
    domains: dict[str, dict[str, float]] = {}
    for domain, rows in group_by(predictions, meta, "domain").items():
        levels = group_by(rows, meta, "level")
        domains[domain] = {level: fmean(won(p) for p in levels[level]) for level in LEVELS if level in levels}
        domains[domain]["average"] = fmean(domains[domain][lv] for lv in LEVELS if lv in domains[domain])
    out: dict[str, Any] = {"sections": domains, "tie_rule": TIE_RULE}
    if all(d in domains for d in DOMAINS):
        four = [domains[d] for d in DOMAINS]
        overall = {level: fmean(d[level] for d in four) for level in LEVELS}
        return {"headline": fmean(d["average"] for d in four), **overall, **out}
    if len(domains) == 1:
        only = next(iter(domains.values()))
        reason = "one domain: RM-Bench's average is over chat, math, code and safety"
        return {"headline": None, "headline_reason": reason, **{lv: only.get(lv) for lv in LEVELS}, **out}
    missing = ", ".join(d for d in DOMAINS if d not in domains)
    reason = f"no {missing}: RM-Bench's overall figures are over chat, math, code and safety"
    return {"headline": None, "headline_reason": reason, **{lv: None for lv in LEVELS}, **out}


def misfit(row: Row) -> Misfit | None:
    """Why a record of list answers is not RM-Bench's: a side without exactly one string per style."""
    for key in ("chosen", "rejected"):
        n = len(row.data[key])
        if n != len(STYLES):
            return key, f"has {n} answer{'' if n == 1 else 's'} where RM-Bench has {len(STYLES)} (one per style)"
        if not all(isinstance(a, str) for a in row.data[key]):
            return key, "holds an answer that is not a string"
    return None


BENCHMARK_FORMATS.add(
    FORMAT,
    BenchmarkFormat(
        FORMAT,
        build,
        summary,
        title="RM-Bench",
        answers="list",
        misfit=misfit,
        fits_as="RM-Bench's three answers per side",
        protocol="rm-bench",
    ),
)


__all__ = [
    "DOMAINS",
    "FORMAT",
    "LEVELS",
    "STYLES",
    "build",
    "difficulty",
    "domain_of",
    "misfit",
    "scored_domain",
    "source_domain",
    "summary",
]
