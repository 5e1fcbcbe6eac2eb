"""rmb review without a browser: sampling, the store (a reopened file resumes), the shuffled answer order
mapped back, alpha and kappa against independent computations, the page's escaping and access rules,
export (labels, figures, gold), audit --review, and Label Studio's files."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
from review_helpers import HOSTILE, alpha_by_pairs, kappa_by_table, small_release

from rmb_build.cli import main
from rmb_build.release.read import read_rmb_release
from rmb_build.release.review_labels import Label, read_labels
from rmb_build.review.agreement import cohen_kappa, krippendorff_alpha
from rmb_build.review.choices import to_release_terms, to_shown
from rmb_build.review.sample import ItemKey, assign, stratified_sample
from rmb_build.review.session import Settings, open_session
from rmb_build.review.store import ReviewStore


def _keys() -> list[ItemKey]:
    cells = [
        ("pairwise", "Helpfulness/Chat/Discussion", 10),
        ("pairwise", "Helpfulness/Code/Documentation", 3),
        ("bon", "Helpfulness/Chat/Discussion", 10),
        ("pairwise", "Harmlessness/S6", 10),
        ("bon", "Harmlessness/S1", 2),
    ]
    return [ItemKey(s, f"{sc}-{i}", sc) for s, sc, n in cells for i in range(n)]


def test_sample_is_spread_over_goals_and_cells_seeded_and_shared_by_overlap():
    keys = _keys()
    sample = stratified_sample(keys, 12, seed=3)
    assert sample == stratified_sample(keys, 12, seed=3) and sample != stratified_sample(keys, 12, seed=4)
    assert len(set(sample)) == 12
    assert Counter(k.goal for k in sample) == {"Helpfulness": 6, "Harmlessness": 6}
    assert sorted(Counter((k.set, k.scenario) for k in sample if k.goal == "Helpfulness").values()) == [2, 2, 2]
    # Harmlessness: BoN S1 has 2 items only; the pairwise cell takes its remaining turns
    assert Counter((k.set, k.scenario) for k in sample if k.goal == "Harmlessness") == {
        ("pairwise", "Harmlessness/S6"): 4,
        ("bon", "Harmlessness/S1"): 2,
    }
    assert len(stratified_sample(keys, None, 0)) == len(keys) == len(stratified_sample(keys, 10_000, 0))

    queues = assign(sample, ["ann", "bob", "cy"], overlap=0.25, seed=3)
    shared = [set(k for k, s in q if s) for q in queues.values()]
    assert shared[0] == shared[1] == shared[2] == set(sample[:3])
    rest = [k for q in queues.values() for k, s in q if not s]
    assert sorted(rest, key=str) == sorted(sample[3:], key=str)  # the rest once each, 3 per person
    assert [len(q) for q in queues.values()] == [6, 6, 6]
    assert [k for k, _ in queues["ann"]] != [k for k, _ in queues["bob"]]  # own order each
    assert [s for _, s in assign(sample, ["solo"], 0.25, 3)["solo"]].count(True) == 0
    # the sample alternates goals: dealing the rest in turn would give one person one goal
    for queue in assign(stratified_sample(keys, 20, 0), ["ann", "bob"], 0.0, 0).values():
        assert Counter(k.goal for k, _ in queue) == {"Helpfulness": 5, "Harmlessness": 5}


def test_the_shown_order_maps_back_to_the_release_terms():
    assert to_release_terms("pairwise", (1, 0), "1") == "rejected"
    assert to_release_terms("pairwise", (1, 0), "2") == "chosen"
    assert to_release_terms("pairwise", (0, 1), "1") == "chosen"
    assert [to_release_terms("bon", (2, 0, 1), k) for k in "123"] == ["loser:1", "best", "loser:0"]
    assert to_release_terms("bon", (2, 0, 1), "tie") == "tie"
    for order, set_name in (((1, 0), "pairwise"), ((3, 1, 0, 2), "bon")):
        for shown in [str(k + 1) for k in range(len(order))] + ["tie", "both_bad", "skip"]:
            assert to_shown(set_name, order, to_release_terms(set_name, order, shown)) == shown
    with pytest.raises(Exception, match="not an answer"):
        to_release_terms("pairwise", (0, 1), "3")


def test_store_resumes_after_reopen_replaces_changed_labels_and_undoes(tmp_path):
    rel = read_rmb_release(small_release(tmp_path / "rel"))
    db = tmp_path / "review.db"
    page, _ = open_session(str(db), rel, "rel", Settings(["ann", "bob"], 6, 0.5, 7), require_token=False)
    store = page.store
    first = store.current("ann")
    store.shown("ann", first.pos)
    store.save(Label(first.key.set, first.key.uid, "ann", "tie"), pos=first.pos)
    second = store.current("ann")
    assert second.pos == first.pos + 1
    store.save(Label(second.key.set, second.key.uid, "ann", "skip"))
    store.close()

    reopened, _ = open_session(str(db), rel, "rel", Settings(["ann"], None, None, None), require_token=False)
    store = reopened.store
    assert store.progress("ann") == (2, 4) and store.progress("bob") == (0, 5)  # 3 shared, the rest 1 and 2
    assert store.current("ann").pos == first.pos + 2
    assert [lb.choice for lb in store.labels()] == ["tie", "skip"]
    assert store.labels()[0].seconds is not None and store.labels()[0].time.endswith("+00:00")
    store.save(Label(first.key.set, first.key.uid, "ann", "both_bad"))  # a changed label replaces the first
    assert sorted(lb.choice for lb in store.labels()) == ["both_bad", "skip"]
    assert store.undo("ann").choice == "both_bad"  # the most recent label goes; its item is due again
    assert store.current("ann").pos == first.pos
    with pytest.raises(Exception, match="planned with --seed 7"):
        open_session(str(db), rel, "rel", Settings(["ann"], None, None, 8), require_token=False)
    with pytest.raises(Exception, match="cy not among them"):
        open_session(str(db), rel, "rel", Settings(["cy"], None, None, None), require_token=False)


def test_alpha_and_kappa_match_independent_computations():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the nominal example: 0.743
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [[str(row[u]) if row[u] else None for row in data] for u in range(12)]
    assert krippendorff_alpha(units)["value"] == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(units)["units"] == 11  # the last unit has one value: not pairable
    rng = random.Random(5)
    for _ in range(20):
        choices = ["chosen", "rejected", "tie", "best", "loser:0", "loser:3"][: rng.randint(2, 6)]
        units = [[rng.choice(choices) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(2, 12))]
        expected = alpha_by_pairs(units)
        got = krippendorff_alpha(units)["value"]
        assert (got is None and expected is None) or got == pytest.approx(expected)
    same = krippendorff_alpha([["chosen", "chosen"], ["chosen", "chosen", None]])
    assert same["value"] is None and same["note"] == "no variation"
    assert krippendorff_alpha([["chosen"]])["value"] is None
    # two people, hand-checked: agree on 3 of 4 (p_o .75), chance (2*3 + 2*1) / 16 = .5, kappa .5
    assert cohen_kappa([("a", "a"), ("a", "a"), ("b", "b"), ("b", "a")])["value"] == pytest.approx(0.5)

    for _ in range(20):
        pairs = [(rng.choice("abc"), rng.choice("abc")) for _ in range(rng.randint(2, 15))]
        got = cohen_kappa(pairs)["value"]
        if got is None:
            assert kappa_by_table(pairs) is None
            continue
        assert got == pytest.approx(kappa_by_table(pairs))
    assert cohen_kappa([("a", "a"), ("a", "a")])["note"] == "no variation"


def _page(tmp_path, require_token=False):
    from starlette.testclient import TestClient

    from rmb_build.review.app import create_app

    rel = read_rmb_release(small_release(tmp_path / "rel"))
    page, tokens = open_session(
        str(tmp_path / "review.db"), rel, "rel", Settings(["ann", "bob"], None, 1.0, 0), require_token=require_token
    )
    host = "http://127.0.0.1:8765" if not require_token else "http://10.1.2.3:8765"
    return page, tokens, TestClient(create_app(page), base_url=host)


def _form(html: str) -> dict:
    return {k: re.search(rf'name="{k}" value="([^"]*)"', html).group(1) for k in ("csrf", "pos")}


def test_page_shows_item_html_as_text_and_hides_who_wrote_what(tmp_path):
    page, _, client = _page(tmp_path)
    for _ in range(40):  # label through ann's queue until the hostile item (pairwise uid 0) is shown
        r = client.get("/a/ann")
        if "window.pwned" in r.text:
            break
        client.post("/a/ann/label", data={**_form(r.text), "choice": "skip"})
    assert "window.pwned" in r.text
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in r.text and "<script>window" not in r.text
    assert "&lt;img src=x onerror=&#34;window.pwned = 2&#34;&gt;" in r.text or "&lt;img src=x onerror=" in r.text
    assert "<strong>bold</strong>" in r.text and 'class="language-python"' in r.text and "1 &lt; 2" in r.text
    assert "model-a" not in r.text and "model-b" not in r.text and "chosen" not in r.text.lower()
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert HOSTILE not in r.text
    assert client.get("/a/ann", headers={"host": "rebound.example:8765"}).status_code == 400
    assert client.get("/a/ann", headers={"host": "[::2]:8765"}).status_code == 400
    assert client.get("/a/ann", headers={"host": "[::1]:8765"}).status_code == 200  # IPv6 loopback


def test_non_loopback_needs_the_token_and_posts_need_the_form_token(tmp_path):
    from starlette.testclient import TestClient

    from rmb_build.review.app import create_app

    page, tokens, client = _page(tmp_path, require_token=True)
    assert client.get("/a/ann").status_code == 403
    assert client.get("/a/ann", params={"t": tokens["bob"]}).status_code == 403
    assert client.get("/").status_code == 403
    assert client.get("/a/nobody", params={"t": tokens["ann"]}).status_code == 404
    r = client.get("/a/ann", params={"t": tokens["ann"]})
    assert r.status_code == 200
    form = _form(r.text)
    assert f'action="/a/ann/label?t={tokens["ann"]}"' in r.text  # the token is checked before the body is read
    assert client.post("/a/ann/label", data={**form, "choice": "1"}).status_code == 403  # no token
    assert client.post("/a/ann/label", data={**form, "choice": "1", "t": tokens["ann"]}).status_code == 403
    t = {"t": tokens["ann"]}
    bad = client.post("/a/ann/label", params=t, data={**form, "csrf": "0" * 64, "choice": "1"})
    assert bad.status_code == 403
    other_site = client.post(
        "/a/ann/label", params=t, data={**form, "choice": "1"}, headers={"origin": "http://evil.example"}
    )
    assert other_site.status_code == 403 and page.store.labels() == []
    ok = client.post(
        "/a/ann/label",
        params=t,
        data={**form, "choice": "1"},
        headers={"origin": "http://10.1.2.3:8765"},
        follow_redirects=False,
    )
    assert ok.status_code == 303 and tokens["ann"] in ok.headers["location"]
    assert len(page.store.labels()) == 1
    stored = page.store.token_hashes()
    assert tokens["ann"] not in json.dumps(stored) and all(len(h) == 64 for h in stored.values())
    rel = read_rmb_release(tmp_path / "rel")
    again = Settings([], None, None, None)
    assert open_session(str(tmp_path / "review.db"), rel, "rel", again, require_token=True)[1] == {
        "ann": None,
        "bob": None,
    }  # a token is printed once: a restart keeps the links and shows none
    fresh, new = open_session(str(tmp_path / "review.db"), rel, "rel", again, require_token=True, new_tokens=True)
    renewed = TestClient(create_app(fresh), base_url="http://10.1.2.3:8765")
    assert renewed.get("/a/ann", params={"t": tokens["ann"]}).status_code == 403
    assert renewed.get("/a/ann", params={"t": new["ann"]}).status_code == 200


def _labels(store, rel, votes):
    """Save ``votes``: {(set, uid): {annotator: choice}} straight into the store."""
    for (set_name, uid), who in votes.items():
        for annotator, choice in who.items():
            flags = ("cut_off",) if choice == "flag-tie" else ()
            store.save(Label(set_name, uid, annotator, "tie" if flags else choice, flags))


@pytest.mark.torch
def test_export_writes_labels_figures_and_a_gold_release_audit_finds_the_overruled(tmp_path):
    rel_dir = small_release(tmp_path / "rel")
    rel = read_rmb_release(rel_dir)
    page, _ = open_session(
        str(tmp_path / "review.db"), rel, str(rel_dir), Settings(["ann", "bob"], None, 1.0, 0), require_token=False
    )
    votes = {
        ("pairwise", "1"): {"ann": "chosen", "bob": "chosen"},  # gold as it is
        ("pairwise", "2"): {"ann": "rejected", "bob": "rejected"},  # gold, swapped; overruled
        ("pairwise", "3"): {"ann": "chosen", "bob": "rejected"},  # no majority
        ("pairwise", "4"): {"ann": "rejected"},  # one person: counted, overruled, not gold
        ("pairwise", "5"): {"ann": "tie", "bob": "tie"},  # agreed tie: not gold
        ("pairwise", "6"): {"ann": "chosen", "bob": "flag-tie"},  # flagged
        ("pairwise", "9"): {"ann": "skip", "bob": "chosen"},  # one judging label: not gold
        ("bon", "0"): {"ann": "loser:1", "bob": "loser:1"},  # their pick becomes bon_best
        ("bon", "1"): {"ann": "best", "bob": "both_bad"},
    }
    _labels(page.store, rel, votes)
    out = tmp_path / "out"
    assert main(["review", "export", "--db", str(tmp_path / "review.db"), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    rows += [json.loads(line) for line in (out / "unjudged.jsonl").read_text().splitlines()]
    assert len(rows) == sum(len(v) for v in votes.values())
    assert len({(r["set"], r["uid"], r["annotator"]) for r in rows}) == len(rows)
    assert set(rows[0]) >= {"set", "uid", "annotator", "choice", "flags", "note", "time"}

    report = json.loads((out / "agreement.json").read_text())
    ann = report["annotators"]["ann"]["pairwise"]
    # ann on pairwise: chosen 1, rejected 0, chosen 1, rejected 0, tie .5, chosen 1; skip left out
    assert ann["overall"]["value"] == pytest.approx(3.5 / 6) and ann["overall"]["n"] == 6
    assert ann["excluded"] == {"skip": 1}
    assert ann["goals"]["Helpfulness"]["value"] == pytest.approx(3.5 / 6) and "Harmlessness" not in ann["goals"]
    assert ann["scenarios"]["Helpfulness/Chat/Discussion"]["value"] == pytest.approx(2 / 3)  # uids 1, 2, 3
    assert ann["scenarios"]["Helpfulness/Code/Documentation"]["value"] == pytest.approx(1.5 / 3)  # uids 4, 5, 6
    lo, hi = ann["overall"]["ci95"]
    assert lo < 3.5 / 6 < hi and ann["overall"]["few_items"]
    majority = report["majority"]["pairwise"]
    # majorities: 1 chosen, 2 rejected, 4 rejected (one person), 5 tie, 9 chosen; 3 and 6 split
    assert majority["overall"]["value"] == pytest.approx(2.5 / 5)
    assert report["majority"]["no_majority"] == 3  # pairwise 3 and 6, bon 1
    assert {(o["set"], o["uid"]) for o in report["overruled"]} == {("pairwise", "2"), ("pairwise", "4"), ("bon", "0")}
    pw = [
        ["chosen", "chosen"],
        ["rejected", "rejected"],
        ["chosen", "rejected"],
        ["tie", "tie"],
        ["chosen", "tie"],
        ["chosen"],
    ]
    assert report["between_people"]["pairwise"]["krippendorff_alpha"]["value"] == pytest.approx(alpha_by_pairs(pw))
    kappa_pairs = [tuple(u) for u in pw if len(u) == 2]
    assert report["between_people"]["pairwise"]["cohen_kappa"]["value"] == pytest.approx(kappa_by_table(kappa_pairs))
    assert "Krippendorff" in (out / "agreement.md").read_text()

    gold = read_rmb_release(out / "gold")
    by_uid = {(it.set_name, it.uid): it for it in gold.items()}
    assert set(by_uid) == {("pairwise", "1"), ("pairwise", "2"), ("bon", "0")}
    original = {(it.set_name, it.uid): it for it in rel.items()}
    assert by_uid[("pairwise", "2")].chosen == original[("pairwise", "2")].rejected
    assert by_uid[("bon", "0")].best == original[("bon", "0")].losers[1]
    assert original[("bon", "0")].best in by_uid[("bon", "0")].losers

    assert (
        main(
            [
                "audit",
                str(rel_dir),
                "--no-embeddings",
                "--review",
                str(out / "labels.jsonl"),
                "--json",
                str(tmp_path / "audit.json"),
                "--fix",
                str(tmp_path / "fixed"),
            ]
        )
        == 0
    )
    audit = json.loads((tmp_path / "audit.json").read_text())
    found = {(d["set"], d["uid"]) for d in audit["defects"]["human_disagrees"]}
    assert found == {("pairwise", "2"), ("pairwise", "4"), ("bon", "0"), ("pairwise", "6")}
    fixed = {(it.set_name, it.uid) for it in read_rmb_release(tmp_path / "fixed", strict=False).items()}
    assert not found & fixed and len(fixed) == len(original) - audit["items_flagged"]
    assert main(["audit", str(rel_dir), "--no-embeddings", "--json", str(tmp_path / "plain.json")]) == 0
    assert json.loads((tmp_path / "plain.json").read_text())["counts"]["human_disagrees"] == 0
    # labels.jsonl holds only the contract's choices; skip and can't-judge are in unjudged.jsonl, and both are read
    judged = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert "skip" not in {r["choice"] for r in judged} and [r["choice"] for r in rows if r not in judged] == ["skip"]
    assert len(read_labels(out / "labels.jsonl")) == len(rows)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[0], "choice": "loser:0"}) + "\n")
    with pytest.raises(Exception, match="bad.jsonl: line 1: field 'choice': 'loser:0' is not a pairwise label"):
        read_labels(bad)

    hf = tmp_path / "hf"
    publish = ["publish", str(rel_dir), "--repo-id", "x/y", "--license", "cc-by-4.0", "--dry-run", "--no-embeddings"]
    assert main([*publish, "--out", str(hf), "--review", str(out / "agreement.json")]) == 0
    card = (hf / "README.md").read_text()
    assert (
        "People against this release's labels" in card and "| people's majority | pairwise | overall | 0.500†" in card
    )
    assert "Krippendorff's alpha" in card
    assert main([*publish, "--out", str(tmp_path / "hf2"), "--review", str(out / "labels.jsonl")]) == 2


def test_label_studio_tasks_and_its_export_read_back(tmp_path):
    rel_dir = small_release(tmp_path / "rel")
    rel = read_rmb_release(rel_dir)
    db = tmp_path / "review.db"
    open_session(str(db), rel, str(rel_dir), Settings(["ann"], 6, None, 0), require_token=False)[0].store.close()
    out = tmp_path / "ls"
    assert main(["review", "export", "--db", str(db), "--out", str(out), "--format", "label-studio"]) == 0
    tasks = json.loads((out / "tasks.json").read_text())
    config = (out / "config.xml").read_text()
    assert '<Pairwise name="preference" toName="answer1,answer2"/>' in config
    assert tasks and all(t["data"]["rmb_set"] == "pairwise" for t in tasks)
    assert "model-a" not in json.dumps(tasks)
    # Label Studio's JSON export of those tasks (its documented format), three annotations
    exported = []
    for n, task in enumerate(tasks[:2]):
        left_is_chosen = task["data"]["rmb_order"] == [0, 1]
        exported.append(
            {
                "id": n + 1,
                "data": task["data"],
                "project": 1,
                "annotations": [
                    {
                        "id": 10 + n,
                        "completed_by": 7,
                        "was_cancelled": False,
                        "lead_time": 4.5,
                        "created_at": "2026-01-01T10:00:00.000000Z",
                        "updated_at": "2026-01-01T10:00:05.000000Z",
                        "result": [
                            {
                                "id": "a1",
                                "from_name": "preference",
                                "to_name": "answer1",
                                "type": "pairwise",
                                "value": {"selected": "left" if left_is_chosen else "right"},
                            },
                            {
                                "id": "a2",
                                "from_name": "flags",
                                "to_name": "answer1",
                                "type": "choices",
                                "value": {"choices": ["answer cut off"]},
                            },
                        ],
                    },
                    {
                        "id": 20 + n,
                        "completed_by": {"id": 8, "email": "kim@example.org"},
                        "was_cancelled": False,
                        "created_at": "2026-01-01T11:00:00Z",
                        "result": [
                            {
                                "id": "b1",
                                "from_name": "verdict",
                                "to_name": "answer1",
                                "type": "choices",
                                "value": {"choices": ["Tie"]},
                            },
                            {
                                "id": "b2",
                                "from_name": "note",
                                "to_name": "answer1",
                                "type": "textarea",
                                "value": {"text": ["close call"]},
                            },
                        ],
                    },
                    {"id": 30 + n, "completed_by": 9, "was_cancelled": True, "result": []},
                ],
            }
        )
    (tmp_path / "export.json").write_text(json.dumps(exported))
    assert main(["review", "import", str(tmp_path / "export.json"), "--db", str(db)]) == 0
    labels = ReviewStore(db).labels()
    assert sorted((lb.annotator, lb.choice) for lb in labels) == sorted(
        [("label-studio:7", "chosen")] * 2 + [("label-studio:kim@example.org", "tie")] * 2
    )
    assert {lb.flags for lb in labels if lb.annotator.endswith(":7")} == {("cut_off",)}
    assert {lb.note for lb in labels if "kim" in lb.annotator} == {"close call"}
    exported[0]["data"]["rmb_release_sha256"] = "0" * 64
    (tmp_path / "other.json").write_text(json.dumps(exported))
    assert main(["review", "import", str(tmp_path / "other.json"), "--db", str(db)]) == 2
