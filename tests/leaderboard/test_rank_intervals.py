"""Rank intervals, separability and the style / length-neutral columns on the leaderboard: computed from the
RMs' item outcomes (real ``rmb evaluate`` runs on a small release with a ``Style_set/``), shown on the page, and
recounted by the kind filter over the RMs shown (headless Chromium; a screenshot goes to tmp_path)."""

from __future__ import annotations

import json
import shutil

import pytest
from browser_helpers import browser  # noqa: F401 (a fixture)
from leaderboard_helpers import SCORER, build, evaluate_all, small_release

from rmb_build.leaderboard.entries import assign_slugs, load_entry
from rmb_build.leaderboard.rank_intervals import rank_uncertainty
from rmb_build.leaderboard.ranking import rank
from rmb_build.release.style_set import STYLES


@pytest.fixture(scope="module")
def boards(tmp_path_factory):
    """(index.html, evaluation folders, specs): four RMs, two of them the same scorer under two specs."""
    tmp = tmp_path_factory.mktemp("ranks")
    release = small_release(tmp / "release")
    records = [
        {
            "id": str(i),
            "prompt": f"Question {i} about Helpfulness/Chat/Discussion?",
            "conversation_input": [{"content": f"Question {i} about Helpfulness/Chat/Discussion?", "role": "user"}],
            "chosen": [f"Right {i}.", f"Right {i}, said at length.", f"**Right {i}**, said at length."],
            "rejected": [f"Wrong {i}!", f"Wrong {i}, said at more length.", f"# Wrong {i}, said at more length"],
            "scenario": "Helpfulness/Chat/Discussion",
        }
        for i in range(8)
    ]
    (release / "Style_set" / "Helpfulness" / "Chat").mkdir(parents=True)
    (release / "Style_set" / "Helpfulness" / "Chat" / "Discussion.json").write_text(json.dumps(records))
    scorer = tmp / "scorer.py"
    scorer.write_text(SCORER, encoding="utf-8")
    specs = ["baseline:length", "baseline:random", f"python:{scorer}:longest", f"python:{scorer}:shortest"]
    folders = evaluate_all(release, tmp, specs)
    return build(folders, tmp / "site"), folders, specs


def test_rank_intervals_and_separability_come_from_the_shared_items(boards):
    _, folders, specs = boards
    entries = [load_entry(f) for f in folders]
    assign_slugs(entries)
    ordered, tests = rank(entries, resamples=1000, seed=0)
    got = rank_uncertainty(ordered, tests, resamples=1000, seed=0)
    ranks, sep = got["ranks"], got["separability"]
    slug = {e.rm: e.slug for e in entries}
    length, random, longest, shortest = (slug[s] for s in specs)
    # the same scorer under two specs: the same rank interval, never separated
    assert ranks[length]["rank_ci"] == ranks[longest]["rank_ci"]
    assert [length, longest, False] in sep["detail"] or [longest, length, False] in sep["detail"]
    assert ranks[shortest]["rank_ci"][1] == 4  # the worst by far
    assert all(r["rank_ci"][0] <= r["rank"] <= r["rank_ci"][1] for r in ranks.values())
    assert sep["pairs"] == 6 and sep["separated"] == sum(d[2] for d in sep["detail"]) and sep["share"] < 1
    # "separated" is the "vs. next" test's verdict, pair by pair
    for a, b in zip(ordered, ordered[1:]):
        assert [a.slug, b.slug, a.vs_next["significant"]] in sep["detail"]


def test_without_item_outcomes_no_interval_is_made_up(boards, tmp_path):
    _, folders, _ = boards
    copy = tmp_path / "copy"
    shutil.copytree(folders[1], copy)
    (copy / "predictions.jsonl").unlink()
    entries = [load_entry(folders[0]), load_entry(copy)]
    assign_slugs(entries)
    ordered, tests = rank(entries, resamples=100)
    got = rank_uncertainty(ordered, tests, resamples=100)
    assert "ranks" not in got and "predictions.jsonl missing" in got["reason"]
    assert rank_uncertainty(entries[:1], {}, resamples=100) == {"reason": "one reward model: nothing to rank against"}


@pytest.mark.slow  # starts Chromium (the tier's rule: docs/testing.md); 5-6 s of CPU with its children
def test_the_page_shows_rank_intervals_separability_and_the_style_columns(browser, boards, tmp_path):  # noqa: F811
    from selenium.webdriver.support.ui import Select

    index, folders, specs = boards
    browser.get(index.as_uri())
    note = browser.find_element("id", "separability-board")
    entries = [load_entry(f) for f in folders]
    assign_slugs(entries)
    assert "of the 6" in note.text and "pairs of reward models shown here at 95%" in note.text
    for rm in specs:
        row = browser.find_element("css selector", f'#board tbody tr[data-rm="{rm}"]')
        lo, _, hi = row.find_element("css selector", 'td[data-col="rank-ci"]').text.partition("–")
        assert 1 <= int(lo) <= int(hi) <= 4
        for col in ("style/hard", "style/normal", "style/easy", "style/prefers_detailed", "length/neutral"):
            assert row.find_element("css selector", f'td[data-col="{col}"]').text.split("\n")[0] != "–"
    row = browser.find_element("css selector", f'#board tbody tr[data-rm="{specs[2]}"]')
    # longest: the detailed variant is always longer than the concise one
    assert row.find_element("css selector", 'td[data-col="style/prefers_detailed"]').text.startswith("100.0")
    browser.save_screenshot(str(tmp_path / "ranks.png"))
    Select(browser.find_element("id", "kind-filter")).select_by_value("python")
    assert note.find_element("css selector", ".sep-count").text in ("0 of the 1", "1 of the 1")
    browser.save_screenshot(str(tmp_path / "ranks-python.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert len(STYLES) == 3
