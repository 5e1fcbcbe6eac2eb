"""The audit learns Style_set/: a record naming no pairwise item, a record without three variants a side (or
whose scenario differs from its file's), and a record with an empty text are new defect kinds; RMB's items are
untouched by them (``--fix`` removes none) and RMB's set files stay byte-exact beside Style_set/."""

from __future__ import annotations

import json

import numpy as np
import pytest
from style_helpers import SCENARIOS, style_records, write_style_file, write_style_release

from rmb_build.cli import main
from rmb_build.release.audit import DEFECT_KINDS, audit_release, fix_release
from rmb_build.release.read import read_rmb_release


def test_style_records_defects_are_counted_by_kind(tmp_path, capsys):
    records = style_records(np.random.default_rng(0))
    release = write_style_release(tmp_path / "rel", records)
    before = {p: p.read_bytes() for p in (release / "Pairwise_set").rglob("*.json")}
    recs = records[SCENARIOS[0]]
    recs[0]["id"] = "999"  # names no pairwise item
    recs[1]["chosen"] = recs[1]["chosen"][:2]  # two variants
    recs[2]["scenario"] = "Harmlessness/S1"  # not its file's
    recs[3]["rejected"][2] = "  \n"  # empty by the identity rule
    write_style_file(release, SCENARIOS[0], recs)
    assert {"style_orphan", "style_variants", "style_empty"} <= set(DEFECT_KINDS)
    report = audit_release(read_rmb_release(release, strict=False), near_duplicates=False)
    got = {k: [(d["uid"], d["index"]) for d in v] for k, v in report.defects.items() if k.startswith("style_")}
    assert got == {
        "style_unknown_scenario": [],
        "style_orphan": [("999", 0)],
        "style_repeated_id": [],
        "style_variants": [("1", 1), ("2", 2)],
        "style_empty": [("3", 3)],
    }
    assert report.defects["style_empty"][0]["detail"] == "empty: rejected[2]"
    assert report.defects["style_variants"][0]["file"] == f"Style_set/{SCENARIOS[0]}.json"
    assert sum(n for k, n in report.counts.items() if not k.startswith("style_")) == 0
    fixed, log = fix_release(read_rmb_release(release, strict=False), report)
    assert log == [] and len(list(fixed.items())) == len(list(read_rmb_release(release, strict=False).items()))
    # the CLI: every kind in counts, 0 where none; the set files untouched
    assert main(["audit", str(release), "--json", str(tmp_path / "audit.json"), "--no-embeddings"]) == 0
    counts = json.loads((tmp_path / "audit.json").read_text())["counts"]
    assert counts["style_orphan"] == 1 and counts["style_variants"] == 2 and counts["style_empty"] == 1
    assert {p: p.read_bytes() for p in (release / "Pairwise_set").rglob("*.json")} == before


def test_repeated_ids_unknown_scenarios_and_bad_losers_that_evaluate_refuses_are_counted(tmp_path, capsys):
    """Issue 48 item 10: main's audit said "0 defects" for a repeated style id and a style file of an unknown
    scenario, which `rmb evaluate` refuses, and for a BoN record's loser index 99 (evaluate scored it)."""
    records = style_records(np.random.default_rng(0))
    release = write_style_release(tmp_path / "rel", records)
    recs = records[SCENARIOS[0]]
    recs[2]["id"] = recs[0]["id"]  # twice
    recs.append({**recs[3], "id": "3", "set": "bon", "loser": 99})  # no BoN item 3, and no loser 99
    write_style_file(release, SCENARIOS[0], recs)
    write_style_file(
        release, "Helpfulness/Chat/Nonsense", [{**records[SCENARIOS[1]][0], "scenario": "Helpfulness/Chat/Nonsense"}]
    )
    report = audit_release(read_rmb_release(release, strict=False), near_duplicates=False)
    got = {
        k: [(d["uid"], d["file"], d["index"]) for d in v] for k, v in report.defects.items() if k.startswith("style_")
    }
    first = f"Style_set/{SCENARIOS[0]}.json"
    assert (recs[0]["id"], first, 2) in got["style_repeated_id"]  # (the unknown scenario's copy repeats one too)
    assert got["style_unknown_scenario"] == [
        (records[SCENARIOS[1]][0]["id"], "Style_set/Helpfulness/Chat/Nonsense.json", 0)
    ]
    assert (recs[-1]["id"], first, len(recs) - 1) in got["style_orphan"]
    assert "repeats the id of" in report.defects["style_repeated_id"][0]["detail"]
    assert main(["audit", str(release), "--json", str(tmp_path / "audit.json"), "--no-embeddings"]) == 0
    counts = json.loads((tmp_path / "audit.json").read_text())["counts"]
    assert (
        set(counts) == set(DEFECT_KINDS) and counts["style_repeated_id"] == 2 and counts["style_unknown_scenario"] == 1
    )


def test_a_clean_style_set_has_no_style_defects(tmp_path):
    release = write_style_release(tmp_path / "rel", style_records(np.random.default_rng(1)))
    report = audit_release(read_rmb_release(release, strict=False), near_duplicates=False)
    assert all(report.counts[k] == 0 for k in DEFECT_KINDS if k.startswith("style_"))
    assert len(read_rmb_release(release).style) == sum(len(v) for v in style_records(np.random.default_rng(1)).values())


@pytest.mark.torch
def test_publish_writes_a_style_configuration_that_reads_back(tmp_path, capsys):
    from rmb_build.release.load import read_release

    records = style_records(np.random.default_rng(2))
    release = write_style_release(tmp_path / "rel", records)
    out = tmp_path / "hf"
    args = ["publish", str(release), "--repo-id", "me/style", "--dry-run", "--out", str(out), "--no-embeddings"]
    assert main([*args, "--license", "cc-by-4.0"]) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "config_name: style" in card and "path: style/test-*" in card
    assert sorted(p.name for p in (out / "style").iterdir()) == ["test-00000-of-00001.parquet"]
    back = read_release(str(out))

    def same(r):
        return (r.id, r.prompt, r.conversation, r.chosen, r.rejected, r.scenario_id)

    assert [same(r) for r in back.style] == [same(r) for r in read_rmb_release(release).style]
    assert len(back.style) == sum(len(v) for v in records.values())


def test_the_review_page_opens_on_a_release_with_a_style_set_and_shows_rmb_items_only(tmp_path):
    """The minimum honest support: people review RMB's two sets; style records are not shown (a Style_set/
    folder used to stop every reader: 'unknown set folder')."""
    from starlette.testclient import TestClient

    from rmb_build.review.app import create_app
    from rmb_build.review.session import Settings, open_session

    records = style_records(np.random.default_rng(3))
    rel = read_rmb_release(write_style_release(tmp_path / "rel", records))
    assert rel.style and rel.pairwise
    page, _ = open_session(
        str(tmp_path / "review.db"), rel, "rel", Settings(["ann"], None, 1.0, 0), require_token=False
    )
    client = TestClient(create_app(page), base_url="http://127.0.0.1:8765")
    r = client.get("/a/ann")
    assert r.status_code == 200 and "Question " in r.text
    assert "detailed_markdown" not in r.text  # only the pairwise items' answers (the concise variants) are shown
