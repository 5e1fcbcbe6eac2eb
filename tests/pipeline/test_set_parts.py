"""The build's sets kept per batch on disk and merged: the same items, annotations and uids as
``build_sets`` over every query at once, for any split of the queries into batches."""

from __future__ import annotations

import random

import pytest

from rmb_build.pipeline import set_parts
from rmb_build.stages.options import SetsConfig
from rmb_build.stages.sets import build_sets
from tests.stages.test_sets import HARM, HELP, judged, label, query

SCENARIOS = [HELP, HARM, "Helpfulness/Chat/Discussion", "Helpfulness/Code/Documentation", "Harmlessness/multi"]


def corpus(n: int):
    rng = random.Random(n)
    queries, rs, ss, labels = [], [], [], []
    for k in range(n):
        q = query(1000 + k, rng.choice(SCENARIOS))
        r, s = judged(q, {f"M{i}": (f"text {i} of {k}", rng.choice([1.0, 3.0, 5.0, 7.0, 9.0])) for i in range(5)})
        queries.append(q), rs.extend(r), ss.extend(s)
        if q.scenario_id.startswith("Harmlessness"):
            labels += [label(q, f"M{i}", rng.choice(["safe", "unsafe"])) for i in range(5)]
    return queries, rs, ss, labels


@pytest.mark.parametrize("batch_size", [1, 7, 40])
def test_merged_parts_are_build_sets_over_all_queries(tmp_path, batch_size):
    queries, rs, ss, labels = corpus(40)
    cfg = SetsConfig(margin=1.0)
    whole = build_sets(queries, rs, ss, labels, cfg)
    assert whole.pairwise and whole.bon
    batches = [queries[i : i + batch_size] for i in range(0, len(queries), batch_size)]
    for index in reversed(range(len(batches))):  # batches finish in any order
        ids = {q.id for q in batches[index]}
        part = build_sets(
            batches[index],
            [r for r in rs if r.query_id in ids],
            [s for s in ss if s.query_id in ids],
            [lb for lb in labels if lb.query_id in ids],
            cfg,
        )
        set_parts.write_part(tmp_path, index, part)
    merged = list(set_parts.merged(tmp_path, range(len(batches))))
    assert [item for item, _ in merged] == [*whole.pairwise, *whole.bon]
    assert [note for _, note in merged] == whole.annotations


def test_clear_keeps_only_the_named_batches(tmp_path):
    queries, rs, ss, labels = corpus(6)
    part = build_sets(queries, rs, ss, labels, SetsConfig(margin=1.0))
    for index in range(3):
        set_parts.write_part(tmp_path, index, part)
    set_parts.clear(tmp_path, keep=[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00001.bon.jsonl", "00001.pairwise.jsonl"]
