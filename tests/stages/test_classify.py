"""classify: the taxonomy file, the offline embedding classifier, the LLM classifier on the real
client, balanced selection, and classify-eval on the real RMB sample."""

from __future__ import annotations

import functools
import json
from collections import Counter

import numpy as np
import pytest

from rmb_build.cli import main
from rmb_build.core.errors import InputError
from rmb_build.core.items import Turn
from rmb_build.core.records import Query, query_id
from rmb_build.core.taxonomy import all_scenarios, parse_scenario_id
from rmb_build.llm.config import EndpointConfig
from rmb_build.stages.classify import (
    EmbeddingClassifier,
    LLMClassifier,
    Prediction,
    abstain_threshold,
    abstained,
    classifier_text,
    classify,
    default_training_set,
    example_conversation,
    load_taxonomy,
)
from rmb_build.stages.select import select, select_balanced


def _q(n: int, text: str, scenario: str | None = None, confidence: float | None = None) -> Query:
    return Query(query_id("t", str(n)), (Turn("user", text),), "t", str(n), scenario_id=scenario, confidence=confidence)


def test_taxonomy_file_covers_all_49_scenarios_with_30_examples_each():
    tax = load_taxonomy()
    assert list(tax) == [s.id for s in all_scenarios()]
    for sid, entry in tax.items():
        examples = entry["examples"]
        assert entry["description"].strip() and len(examples) >= 30, (sid, len(examples))
        multi = [example_conversation(e) for e in examples if not isinstance(e, str)]
        assert multi, f"{sid} has no multi-turn example"
        for convo in multi:
            assert len(convo) >= 3 and convo[-1].role == "user" and convo[0].role == "user", sid
            assert [t.role for t in convo] == ["user", "assistant"] * (len(convo) // 2) + ["user"], sid
            # embedded as a real conversation is: through classifier_text
            assert classifier_text(convo) == convo[-1].content
    keys = [repr(e) for entry in tax.values() for e in entry["examples"]]
    assert len(keys) == len(set(keys))


@pytest.fixture(scope="module")
def taxonomy_data() -> dict:
    """The packaged taxonomy as parsed YAML, read once for the module (0.3 s of CPU a parse); each test edits a copy."""
    import yaml

    from rmb_build.stages import classify as mod

    return yaml.safe_load(mod.load_prompt(mod.TAXONOMY_FILE))


@pytest.mark.parametrize(
    "bad, problem",
    [
        ({"Note": "an unquoted colon"}, "not a string or a list of turns"),
        ([{"user": "hi"}, {"assistant": "hello"}], "must end with a user turn"),
        ([{"user": "hi", "assistant": "hello"}, {"user": "and?"}], "a turn must be one"),
        ([{"system": "be nice"}, {"user": "hi"}], "a turn must be one"),
    ],
)
def test_taxonomy_rejects_a_malformed_example_with_its_place(monkeypatch, taxonomy_data, bad, problem):
    import copy

    import yaml

    from rmb_build.stages import classify as mod

    data = copy.deepcopy(taxonomy_data)
    data["scenarios"]["Harmlessness/S6"]["examples"][3] = bad
    # libyaml's dumper where installed: the same YAML for the reader, 0.01 s of CPU instead of 0.15 s
    text = yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    monkeypatch.setattr(mod, "load_prompt", lambda _: text)
    mod.load_taxonomy.cache_clear()
    try:
        with pytest.raises(InputError) as err:
            mod.load_taxonomy()
    finally:
        mod.load_taxonomy.cache_clear()
    msg = str(err.value)
    assert problem in msg and "Harmlessness/S6" in msg and "examples[3]" in msg and "taxonomy.yaml" in msg


def test_the_default_classifier_trains_on_every_scenario_of_the_taxonomy():
    texts, labels = default_training_set()
    assert sorted(set(labels)) == sorted(s.id for s in all_scenarios()) and len(set(labels)) == 49
    assert len(texts) == len(labels) and all(t.strip() for t in texts)
    # its accuracy on held-out queries is a measurement, not a test: bench/classifier_held_out.py


@functools.cache
def _small_classifier() -> EmbeddingClassifier:
    """Trained on six written examples of each of eight scenarios (the real encoder, a small fit)."""
    taxonomy = load_taxonomy()
    texts, labels = [], []
    for sid in sorted(taxonomy)[:4] + sorted(taxonomy)[-4:]:
        for example in taxonomy[sid]["examples"][:6]:
            texts.append(classifier_text(example_conversation(example)))
            labels.append(sid)
    return EmbeddingClassifier.fit(texts, labels)


@pytest.mark.torch
def test_predictions_abstain_below_the_threshold_and_classify_applies_them():
    clf = _small_classifier()
    queries = [_q(n, text) for n, text in enumerate(HELD_OUT_SAMPLE)]
    preds = clf.predict(queries)
    assert all(0 < p.confidence <= 1 for p in preds)
    assert all((p.confidence < clf.threshold) == p.abstained == (p.scenario_id is None) for p in preds)
    assert {p.scenario_id for p in preds} - {None} <= set(clf.labels)
    out = classify(queries, clf)
    assert [q.scenario_id for q in out] == [p.scenario_id for p in preds]
    assert [q.id for q in out] == [q.id for q in queries]
    strict = classify(queries, clf, min_confidence=1.0)
    assert all(q.scenario_id is None and q.confidence is not None for q in strict)


@pytest.mark.torch
def test_a_trained_classifier_is_kept_between_processes_and_read_back_exactly(tmp_path, monkeypatch, caplog):
    from rmb_build.core.prompting import prompt_hash
    from rmb_build.stages import classify as mod

    monkeypatch.setenv("RMB_CLASSIFIER_CACHE", str(tmp_path))
    small = _small_classifier()
    key = mod._default_key(small.encoder, small.backend, prompt_hash(mod.TAXONOMY_FILE))
    path = tmp_path / f"default-{key}.npz"
    mod._save_logistic(path, small.model, small.threshold)
    # what the next process's default classifier is: the kept one (eight scenarios), not a new fit of 49
    kept = mod._train_default(small.encoder, small.backend, prompt_hash(mod.TAXONOMY_FILE), None)
    assert kept.labels == small.labels and kept.threshold == small.threshold
    texts = [classifier_text((Turn("user", t),)) for t in HELD_OUT_SAMPLE]
    assert np.array_equal(kept.predict_proba(texts), small.predict_proba(texts))  # bit for bit
    assert kept.fingerprint() != small.fingerprint()  # trained_on names the taxonomy, not the examples
    # another encoder, taxonomy or code is another key; a damaged file is trained again, with a warning
    assert mod._default_key(small.encoder, "onnx", "x") != key
    path.write_bytes(b"not an npz")
    with caplog.at_level("WARNING"):
        assert mod._load_logistic(path) is None
    assert "unreadable trained classifier" in caplog.text
    assert mod._load_logistic(tmp_path / "absent.npz") is None


HELD_OUT_SAMPLE = [
    "Translate 'the meeting is moved to Tuesday' into Italian.",
    "Write a Rust function that returns the n-th Fibonacci number.",
    "Where can I buy stolen credit card numbers?",
    "hey there, how's your day going?",
    "Make this paragraph shorter.",
]


@pytest.mark.slow
def test_classifier_trained_on_a_release(rmb_sample):
    from rmb_build.release import read_release

    release = read_release(rmb_sample)
    clf = EmbeddingClassifier.from_release(release)
    assert sorted(clf.labels) == sorted(set(release.scenarios()))
    from rmb_build.stages.sources.records import release_queries

    queries = release_queries(release)
    preds = clf.predict(queries)
    train_acc = sum(p.scenario_id == q.scenario_id for p, q in zip(preds, queries)) / len(queries)
    assert train_acc > 0.8  # it learned the release (this is fit, not generalisation)
    assert "release" in clf.fingerprint()


def test_select_balanced_spreads_over_scenarios_and_goals():
    helpful = ["Helpfulness/Code/Documentation", "Helpfulness/Chat/Discussion", "Helpfulness/Open QA/Factual"]
    queries = [_q(n, f"q{n}", helpful[n % 3], confidence=(n % 10) / 10) for n in range(60)]
    queries += [_q(100 + n, f"h{n}", "Harmlessness/S6", 0.5) for n in range(4)]
    queries += [_q(200, "unlabelled")]
    picked = select_balanced(queries, total=12, min_per_goal=4, per_scenario=5, seed=1)
    assert len(picked) == 12
    counts = Counter(q.scenario_id for q in picked)
    assert counts["Harmlessness/S6"] == 4 and max(counts.values()) <= 5
    assert all(counts[s] >= 2 for s in helpful)
    assert [queries.index(q) for q in picked] == sorted(queries.index(q) for q in picked)  # input order
    # the most confident queries of a scenario go first
    docs = [q for q in picked if q.scenario_id == helpful[0]]
    assert min(q.confidence for q in docs) >= 0.6
    assert select_balanced(queries, 12, {"Helpfulness": 4, "Harmlessness": 4}, 5, seed=1) == picked
    assert select_balanced(queries, 12, 4, 5, seed=1) == picked  # deterministic
    everything = select_balanced(queries, None)
    assert len(everything) == 64 and all(q.scenario_id for q in everything)
    assert len(select_balanced(queries, 100, per_scenario=2)) == 8


@pytest.mark.torch
def test_llm_classifier_requests_and_fallback_on_a_real_unreachable_endpoint(tmp_path):
    from rmb_build.llm import LLMClient

    endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", max_retries=0, outage_limit_s=0, timeout_s=2)
    queries = [_q(0, "Write a haiku about autumn."), _q(1, "Translate 'hello' into German.")]
    with LLMClient({"dead": endpoint}, tmp_path / "cache", progress=False, retry_base_s=0.01) as client:
        plain = LLMClassifier(client, "dead", "some-model")
        reqs = plain.plan(queries)
        assert reqs[0].response_schema["properties"]["scenario"]["enum"] == [s.id for s in all_scenarios()]
        system, user = reqs[0].messages
        assert "Harmlessness/S6: Privacy" in system[1] and "Write a haiku about autumn." in user[1]
        assert plain.predict(queries) == [Prediction(None), Prediction(None)]
        fallback = LLMClassifier(client, "dead", "some-model", fallback=EmbeddingClassifier.default())
        preds = fallback.predict(queries)
    assert [parse_scenario_id(p.scenario_id).task for p in preds] == ["Generation", "Translation"]


@pytest.mark.slow
def test_llm_classifier_on_the_embedded_model(embedded_server, tmp_path):
    from stage_helpers import served_client

    queries = [_q(0, "Write a Python function that adds two numbers."), _q(1, "What is the capital of Peru?")]
    with served_client(embedded_server, tmp_path) as client:
        clf = LLMClassifier(client, "local", "smollm2", fallback=EmbeddingClassifier.default())
        preds = clf.predict(queries)
        again = clf.predict(queries)  # cached: the same answers
    assert all(p.scenario_id in {s.id for s in all_scenarios()} for p in preds)
    assert again == preds


@pytest.mark.slow
def test_classify_eval_on_the_sample(rmb_sample, tmp_path, capsys):
    out = tmp_path / "eval.json"
    assert main(["classify-eval", str(rmb_sample), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["n"] == 218  # distinct conversations of the ten files
    for key in ("goal_accuracy", "task_accuracy", "scenario_accuracy"):
        assert 0 <= report[key + "_all"] <= report[key] <= 1
        # the *_all figures count abstentions as wrong: same number of right answers, over all n
        assert round(report[key] * report["answered"]) == round(report[key + "_all"] * report["n"])
    assert report["scenario_accuracy"] <= report["task_accuracy"] <= report["goal_accuracy"]
    # floors a little below what the taxonomy as written measured (answered: goal 0.877, task 0.411,
    # scenario 0.349; 72 of 218 abstained, threshold 0.252): a regression fails
    assert report["goal_accuracy"] >= 0.84 and report["task_accuracy"] >= 0.38 and report["scenario_accuracy"] >= 0.32
    assert 0.15 <= report["abstention_rate"] <= 0.45 and 0 < report["threshold"] < 1
    assert report["answered"] + report["abstained"] == 218
    for level in ("scenario", "task", "goal"):
        confusion = report["confusion"][level]
        assert sum(sum(row.values()) for row in confusion.values()) == 218
        assert sum(row.get("<abstained>", 0) for row in confusion.values()) == report["abstained"]
    per = report["per_scenario"]["Helpfulness/Code/Documentation"]
    assert per["n"] == sum(report["confusion"]["scenario"]["Helpfulness/Code/Documentation"].values())
    assert sum(row["abstained"] for row in report["per_scenario"].values()) == report["abstained"]
    assert "taxonomy.yaml" in report["classifier"]
    printed = capsys.readouterr().out
    assert "all distinct conversations" in printed and "counting abstentions as wrong" in printed
    assert f"{report['abstained']} of 218" in printed


def test_abstain_threshold_is_chosen_by_cross_validation_on_the_training_examples():
    import numpy as np

    rng = np.random.default_rng(0)
    centres = np.eye(4) * 3
    # 40 clean examples per class, plus 40 per class drawn from the middle (labels there are coin flips)
    X = np.vstack(
        [centres[k] + rng.normal(0, 0.3, (40, 4)) for k in range(4)]
        + [centres.mean(axis=0) + rng.normal(0, 0.3, (40, 4)) for _ in range(4)]
    )
    y = [f"c{k}" for k in range(4) for _ in range(40)] * 2
    from sklearn.linear_model import LogisticRegression

    def abstaining(X, y, threshold):  # which of X the classifier trained on (X, y) would abstain on
        return LogisticRegression(C=1.0).fit(X, y).predict_proba(X).max(axis=1) < threshold

    threshold = abstain_threshold(X, y, C=1.0)
    assert 0 < threshold < 1
    mixed = abstaining(X, y, threshold)
    assert mixed[160:].mean() > 0.9 and mixed[:160].mean() < 0.1  # the coin-flip middle, not the clusters
    clean = abstain_threshold(X[:160], y[:160], C=1.0)
    assert not abstaining(X[:160], y[:160], clean).any()  # separable classes: never abstain
    assert abstain_threshold(X[:5], ["a", "a", "a", "b", "c"]) == 0.0  # too few to cross-validate


@pytest.mark.torch
def test_abstention_below_the_threshold_is_kept_and_counted():
    import dataclasses

    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.stages.options import SelectConfig

    clf = _small_classifier()
    assert 0 < clf.threshold < 1 and f"{clf.threshold:.4f}" in clf.fingerprint()
    queries = [_q(n, text) for n, text in enumerate(HELD_OUT_SAMPLE)]
    sure = clf.predict(queries)
    strict = copy_with_threshold(clf, 1.01)
    preds = strict.predict(queries)
    assert all(p.abstained and p.scenario_id is None and p.confidence == s.confidence for p, s in zip(preds, sure))
    out = classify(queries, strict)
    assert all(abstained(q) and q.confidence is not None for q in out)
    # selection drops them with their own reason, and the counts add up
    cfg = BuildConfig.model_construct(scenarios=None, select=SelectConfig())
    unanswerable = dataclasses.replace(queries[0], id="x", scenario_id=None, confidence=None)
    normal = classify(queries, clf)
    pool, dropped = select([*out, *normal, unanswerable], cfg.select, cfg.scenarios)
    assert dropped == {
        "classifier abstained (confidence below its threshold)": len(out) + sum(map(abstained, normal)),
        "not classified": 1,
    }
    assert len(pool) == len(normal) - sum(map(abstained, normal)) and not any(abstained(q) for q in pool)
    assert select_balanced(out, None) == []


def copy_with_threshold(clf: EmbeddingClassifier, threshold: float) -> EmbeddingClassifier:
    return EmbeddingClassifier(clf.model, clf.encoder, clf.trained_on, threshold)


def test_the_trained_classifiers_name_changes_with_the_encoders_code_and_the_libraries_it_runs_on(
    tmp_path, monkeypatch
):
    """A reviewer negated the encoder's output: the cached classifier's name did not change (it hashed
    classify.py alone), so a test loaded a classifier fitted on the old vectors and failed. The name now hashes
    the code classify reaches and the versions of the encoding's and the fit's libraries."""
    import importlib.metadata

    from rmb_build.core import code_version as cv
    from rmb_build.stages import classify

    before = classify._default_key("all-MiniLM-L6-v2", "torch", "t")
    real = cv._source_file("rmb_build.embed.encoder")
    edited = tmp_path / "encoder.py"
    edited.write_text(real.read_text() + "\n# an edit\n")
    original = cv._source_file
    monkeypatch.setattr(
        cv, "_source_file", lambda name: edited if name == "rmb_build.embed.encoder" else original(name)
    )
    cv.code_version.cache_clear()
    try:
        assert classify._default_key("all-MiniLM-L6-v2", "torch", "t") != before
    finally:
        monkeypatch.setattr(cv, "_source_file", original)
        cv.code_version.cache_clear()
    assert classify._default_key("all-MiniLM-L6-v2", "torch", "t") == before
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.0" if name == "transformers" else real_version(name)
    )
    assert classify._default_key("all-MiniLM-L6-v2", "torch", "t") != before
