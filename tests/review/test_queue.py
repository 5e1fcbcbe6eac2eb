"""A review in the order of an audit's consensus ranking (``rmb review serve --queue AUDIT_JSON``): every annotator
sees the items most reward models contradict first, so people check the likeliest label errors first."""

from __future__ import annotations

import json

import pytest
from review_helpers import small_release

from rmb_build.core.errors import RMBError
from rmb_build.release.read import read_rmb_release
from rmb_build.review.sample import ItemKey, assign, queued_sample
from rmb_build.review.session import Settings, open_session


def _audit(path, keys) -> str:
    items = [{"set": s, "uid": u, "rank": r} for r, (s, u) in enumerate(keys, start=1)]
    path.write_text(json.dumps({"consensus": {"items": items}}))
    return str(path)


def test_a_queue_keeps_its_order_for_every_annotator():
    keys = [ItemKey("pairwise", str(i), "Helpfulness/Chat/Discussion") for i in range(8)]
    ranked = [("pairwise", str(i)) for i in (5, 2, 7, 0, 1, 3, 4, 6)] + [("pairwise", "gone")]
    sample = queued_sample(keys, ranked, 6)
    assert [k.uid for k in sample] == ["5", "2", "7", "0", "1", "3"]
    dealt = assign(sample, ["ann", "bob"], 0.34, seed=9, keep_order=True)
    for queue in dealt.values():
        order = [k.uid for k, _ in queue]
        assert order == sorted(order, key=[k.uid for k in sample].index)  # the ranking's order, not shuffled
        assert [k.uid for k, shared in queue if shared] == ["5", "2"]  # the likeliest errors shared by all


def test_a_review_opened_with_an_audits_queue_shows_the_likeliest_errors_first(tmp_path):
    rel = read_rmb_release(small_release(tmp_path / "rel"))
    keys = [(it.set_name, str(it.uid)) for it in rel.items()]
    ranked = list(reversed(keys))
    audit = _audit(tmp_path / "audit.json", ranked)
    page, _ = open_session(str(tmp_path / "r.db"), rel, "rel", Settings(["ann"], 3, 0.0, 0, audit), require_token=False)
    shown = [(a.key.set, a.key.uid) for a in (page.store.assignment("ann", pos) for pos in range(3))]
    assert shown == ranked[:3]
    assert page.store.meta()["queue"] == audit
    page.store.close()
    with pytest.raises(RMBError, match="planned with --queue"):
        open_session(
            str(tmp_path / "r.db"), rel, "rel", Settings(["ann"], None, None, None, "other.json"), require_token=False
        )


def test_an_audit_of_another_release_or_without_a_ranking_is_one_line(tmp_path):
    rel = read_rmb_release(small_release(tmp_path / "rel"))
    other = _audit(tmp_path / "other.json", [("pairwise", "no-such-uid")])
    with pytest.raises(
        RMBError, match=r"field 'consensus.items\[0\]': item no-such-uid of set pairwise is not in this"
    ):
        open_session(
            str(tmp_path / "a.db"), rel, "rel", Settings(["ann"], None, None, None, other), require_token=False
        )
    (tmp_path / "null.json").write_text(json.dumps({"consensus": None}))
    with pytest.raises(RMBError, match="holds no consensus ranking"):
        open_session(
            str(tmp_path / "n.db"),
            rel,
            "rel",
            Settings(["ann"], None, None, None, str(tmp_path / "null.json")),
            require_token=False,
        )
    (tmp_path / "bare.json").write_text(json.dumps({"defects": {}}))
    with pytest.raises(RMBError, match="holds no consensus ranking"):
        open_session(
            str(tmp_path / "b.db"),
            rel,
            "rel",
            Settings(["ann"], None, None, None, str(tmp_path / "bare.json")),
            require_token=False,
        )
