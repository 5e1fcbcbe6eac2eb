"""The manifest and the dataset card report pairs per query and a histogram of score gaps per set."""

from __future__ import annotations

from rmb_build.core.items import Turn
from rmb_build.core.records import JudgeScore, Query, Response, query_id
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.manifest import Accounting
from rmb_build.pipeline.release_step import entries_of, write_built_release
from rmb_build.release.card import render_card
from rmb_build.release.load import read_release
from rmb_build.stages.options import SetsConfig
from rmb_build.stages.sets import build_sets

SCENARIO = "Helpfulness/Open QA/Factual"


def test_pairs_per_query_and_gap_histograms_reach_manifest_and_card(tmp_path):
    queries, rs, ss = [], [], []
    for n, k in ((1, 6), (2, 3)):  # six answers: 15 candidates, 10 pairs; three: all 3 pairs
        q = Query(query_id("t", str(n)), (Turn("user", f"question {n}"),), "t", str(n), scenario_id=SCENARIO)
        queries.append(q)
        for i in range(k):
            mean = 1.0 + 1.5 * i
            rs.append(Response(q.id, f"M{i}", "m", "local", f"answer {i} to {n}", "stop"))
            ss.append(JudgeScore(q.id, f"M{i}", (mean,), mean, 0.0, ("ok",), "local/j", f"criteria/{SCENARIO}.md"))
    sets = build_sets(queries, rs, ss, [], SetsConfig(margin=1.0))
    cfg = parse_config(
        {
            "name": "sel",
            "license": "cc0-1.0",
            "endpoints": {"local": {"embedded": "smollm2"}},
            "generators": [{"endpoint": "local", "model": "m"}],
            "min_generators": 1,
            "judge": {"endpoint": "local", "model": "j"},
            "guard": {"endpoint": "local", "model": "g"},
        }
    )
    acc = Accounting(gathered=2, selected=2)
    acc.fill(queries, rs, ss, [*sets.pairwise, *sets.bon], 6, 0)
    manifest = write_built_release(
        cfg,
        entries_of([*sets.pairwise, *sets.bon], sets.annotations),
        tmp_path / "sel",
        accounting=acc,
        stages=[],
        failures={},
        near_duplicates=False,
    )
    pw = manifest["sets"]["pairwise"]
    assert pw["per_query"] == {"3": 1, "10": 1} and pw["items"] == 13 and pw["mean_per_query"] == 6.5
    assert sum(pw["score_gaps"].values()) == 13 == sum(sets.stats["pair_gaps"].values())
    assert pw["score_gaps"] == sets.stats["pair_gaps"] and "[1,2)" in pw["score_gaps"]
    assert sum(manifest["sets"]["bon"]["score_gaps"].values()) == sum(len(b.losers) for b in sets.bon)
    card = render_card(read_release(tmp_path / "sel"), repo_id="me/sel")
    assert "## How the items were selected" in card and "policy `stratified`" in card
    assert "13 items over 2 queries (mean 6.5 per query; 3 item(s): 1 queries, 10 item(s): 1 queries)" in card
    assert "| [1,2) |" in card and "compared with no other answer" in card
    assert "relaxed the checks" in card and "min_generators is 1" in card
