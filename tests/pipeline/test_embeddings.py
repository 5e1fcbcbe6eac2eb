"""One embedding per text per build: dedup, the embedding classifier and the release audit share one
embedding store (real all-MiniLM-L6-v2), so a text two stages ask for is encoded once, a store
opened again on the same folder encodes nothing it has, and every result equals the plain encoder's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rmb_build.core.errors import ConfigError
from rmb_build.core.items import Turn
from rmb_build.core.records import Query
from rmb_build.core.text import search_text
from rmb_build.embed.encoder import Encoder
from rmb_build.embed.store import EmbeddingStore
from rmb_build.pipeline.config import parse_config
from rmb_build.release import read_release
from rmb_build.release.audit import audit_release
from rmb_build.stages.classify import EmbeddingClassifier, classifier_text, classify
from rmb_build.stages.dedup import dedup
from rmb_build.stages.options import DedupConfig

CODE, POEM = "Helpfulness/Code/Development and Implementation", "Helpfulness/Generation/Creative Writing"
TEXTS = [
    ("q1", ["How do I reverse a list in Python?"]),
    ("q2", ["How do I reverse a list in Python?"]),  # exact duplicate of q1
    ("q3", ["How can I reverse a list in Python?"]),  # near duplicate of q1
    ("q4", ["Write a short poem about autumn rain."]),
    ("q5", ["Write a haiku about the sea.", "Thanks! Now make it rhyme."]),  # two user turns: two texts
    ("q6", ["Explain recursion to a child."]),
]
TRAIN = [
    ("How do I sort a dict by value in Python?", CODE),
    ("Fix this JavaScript loop for me.", CODE),
    ("Write a sonnet about the moon.", POEM),
    ("A limerick about a cat, please.", POEM),
]


def _queries() -> list[Query]:
    out = []
    for qid, users in TEXTS:
        conv: list[Turn] = []
        for k, u in enumerate(users):
            if k:
                conv.append(Turn("assistant", "Sure."))
            conv.append(Turn("user", u))
        out.append(Query(id=qid, conversation=tuple(conv), source="test", source_id=qid))
    return out


class Counting:
    """The real encoder, recording every text it is sent."""

    def __init__(self):
        self.encoder, self.sent = Encoder(), []

    def __call__(self, texts):
        self.sent.extend(texts)
        return self.encoder(texts)


def _store(folder: Path, enc: Counting) -> EmbeddingStore:
    return EmbeddingStore(folder, enc.encoder.fingerprint, enc)


def _release(root: Path, queries: list[Query]) -> Path:
    """A pairwise release with one item per classified query (in its scenario)."""
    files: dict[str, list[dict]] = {}
    for n, q in enumerate(queries):
        conv = [{"role": t.role, "content": t.content, "language": "English"} for t in q.conversation]
        files.setdefault(q.scenario_id, []).append(
            {
                "pair_uid": str(n),
                "conversation_input": conv,
                "chosen": {"llm_name": "a", "answer": f"good {n}"},
                "reject": {"llm_name": "b", "answer": f"bad {n}"},
                "category_path": f"Pairwise_set/{q.scenario_id}",
            }
        )
    for scenario, items in files.items():
        path = root / "Pairwise_set" / f"{scenario}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items), encoding="utf-8")
    return root


def _stages(embed, tmp_path: Path, tag: str):
    """dedup -> classify -> audit, every vector from ``embed``; their results."""
    result = dedup(_queries(), DedupConfig(threshold=0.9), embed=embed)
    clf = EmbeddingClassifier.fit([t for t, _ in TRAIN], [s for _, s in TRAIN], abstain=False, embed=embed)
    labelled = classify(result.kept, clf)
    report = audit_release(
        read_release(_release(tmp_path / f"release-{tag}", labelled)), near_threshold=0.9, embed=embed
    )
    return result, labelled, report


@pytest.mark.torch
def test_stages_through_one_store_encode_each_text_once_and_agree_with_the_plain_encoder(tmp_path):
    enc = Counting()
    store = _store(tmp_path / "emb", enc)
    result, labelled, report = _stages(store, tmp_path, "store")

    # every distinct text asked for by any stage was sent to the encoder exactly once
    asked = (
        {search_text(q.conversation) for q in _queries()}
        | {classifier_text(q.conversation) for q in labelled}
        | {t for t, _ in TRAIN}
    )
    assert sorted(enc.sent) == sorted(asked)
    assert store.stats.encoded == store.stats.distinct == len(asked) == len(store)
    assert store.stats.requested > len(asked)  # classify and the audit asked again for dedup's texts

    # the same decisions as with the plain encoder (no store)
    plain = _stages(Encoder(), tmp_path, "plain")
    assert [q.id for q in result.kept] == [q.id for q in plain[0].kept] == ["q1", "q4", "q5", "q6"]
    assert [d.to_json() for d in result.removed] == [d.to_json() for d in plain[0].removed]
    assert [(q.id, q.scenario_id) for q in labelled] == [(q.id, q.scenario_id) for q in plain[1]]
    assert report.counts == plain[2].counts and report.checks == plain[2].checks

    # a new store object on the same folder (a re-run build, another process): nothing is encoded again
    enc2 = Counting()
    again = _store(tmp_path / "emb", enc2)
    result2, labelled2, _ = _stages(again, tmp_path, "again")
    assert enc2.sent == [] and again.stats.encoded == 0 and again.stats.requested == store.stats.requested
    assert [(q.id, q.scenario_id) for q in labelled2] == [(q.id, q.scenario_id) for q in labelled]
    np.testing.assert_array_equal(again(sorted(asked)), store(sorted(asked)))


@pytest.mark.torch
def test_a_classifier_refuses_vectors_of_another_encoder(tmp_path):
    clf = EmbeddingClassifier.fit([t for t, _ in TRAIN], [s for _, s in TRAIN], abstain=False)
    other = EmbeddingStore(tmp_path, "another-encoder@1", Encoder())
    with pytest.raises(ValueError, match="another-encoder"):
        clf.using(other)


def _cfg(**over) -> dict:
    cfg = {
        "name": "emb",
        "endpoints": {"local": {"embedded": "smollm2"}},
        "generators": [{"endpoint": "local", "model": "smollm2"}],
        "min_generators": 1,
        "judge": {"endpoint": "local", "model": "smollm2", "allow_self_judging": True},
        "guard": {"endpoint": "local", "model": "smollm2"},
    }
    cfg.update(over)
    return cfg


def test_embeddings_config_and_the_deprecated_dedup_model():
    cfg = parse_config(_cfg())
    assert (cfg.embeddings.model, cfg.embeddings.backend, cfg.embeddings.dtype) == (
        "all-MiniLM-L6-v2",
        "torch",
        "float32",
    )
    old = parse_config(_cfg(dedup={"model": "some/encoder"}))
    assert old.embeddings.model == old.dedup.model == "some/encoder"
    new = parse_config(_cfg(embeddings={"model": "some/encoder", "backend": "onnx", "dtype": "float16"}))
    assert new.dedup.model == "some/encoder" and new.embeddings.backend == "onnx"
    with pytest.raises(ConfigError, match="dedup.model .* differs from embeddings.model"):
        parse_config(_cfg(dedup={"model": "a"}, embeddings={"model": "b"}))
    with pytest.raises(ConfigError, match="did you mean 'backend'"):
        parse_config(_cfg(embeddings={"backnd": "onnx"}))
    with pytest.raises(ConfigError, match="embeddings.backend"):
        parse_config(_cfg(embeddings={"backend": "tensorflow"}))


def test_cache_keys_follow_the_encoder():
    from rmb_build.pipeline.keys import stage_key
    from rmb_build.stages import classify, dedup

    base = parse_config(_cfg())
    onnx = parse_config(_cfg(embeddings={"backend": "onnx"}))
    half = parse_config(_cfg(embeddings={"dtype": "float16"}))
    qs = _queries()
    assert len({stage_key(dedup.SPEC, c, qs) for c in (base, onnx, half)}) == 3
    assert len({stage_key(classify.SPEC, c, qs) for c in (base, onnx, half)}) == 3


@pytest.mark.slow
def test_a_build_embeds_each_text_once_and_a_rerun_encodes_nothing(tmp_path):
    """dedup, classify and the release's audit through the run folder's store; the re-run (classify and
    dedup settings changed so that both run again) finds every vector there."""
    from reliability_helpers import build_config, write_queries
    from stub_endpoint import StubEndpoint

    from rmb_build.pipeline.run import run_local

    source = write_queries(tmp_path / "queries.jsonl")
    work = tmp_path / "work"
    with StubEndpoint() as stub:

        def build(**over):
            cfg = {**build_config(source, stub.base_url, name="emb"), **over}
            cfg["stages"] = ["gather", "dedup", "classify", "generate", "judge", "guard", "build_sets", "release"]
            return run_local(parse_config(cfg), work)

        first = build()
        summary = json.loads((work / "runs" / "emb" / "summary.json").read_text())
        manifest = json.loads(Path(first["release"], "manifest.json").read_text())
        again = build(dedup={"threshold": 0.95}, classifier={"min_confidence": 0.01})
        rerun = json.loads((work / "runs" / "emb" / "summary.json").read_text())

    stages = {s["stage"]: s for s in summary["stages"]}
    total = summary["embeddings"]
    for name in ("dedup", "classify"):
        assert total["per_stage"][name] == stages[name]["stats"]["embeddings"]
    for name in ("dedup", "classify", "release"):  # release: its audit's near-duplicate check
        figures = total["per_stage"][name]
        assert set(figures) == {"requested", "distinct", "encoded", "encode_seconds"} and figures["requested"] > 0
    assert total["fingerprint"] == Encoder().fingerprint and total["distinct_texts"] > 0
    assert total["encoded"] == total["distinct_texts"] and total["embeds_per_distinct_text"] == 1.0
    assert total["requested"] == sum(f["requested"] for f in total["per_stage"].values())
    assert total["per_stage"]["release"]["encoded"] == 0  # the audit's prompts were all dedup's texts
    assert summary["release_seconds"] > 0
    # the manifest has the same figures
    assert {k: v for k, v in manifest["embeddings"].items() if k not in ("per_stage", "encode_seconds")} == {
        k: v for k, v in total.items() if k not in ("per_stage", "encode_seconds")
    }

    reran = {s["stage"]: s for s in rerun["stages"]}
    assert reran["dedup"]["cached_batches"] == 0 and reran["classify"]["cached_batches"] == 0
    assert rerun["embeddings"]["requested"] > 0 and rerun["embeddings"]["encoded"] == 0
    assert rerun["embeddings"]["distinct_texts"] == total["distinct_texts"]
    assert again["counts"] == first["counts"]


@pytest.mark.slow
def test_the_encoder_runs_with_no_query_held(tmp_path, monkeypatch):
    """The encoder's passes are a build's peak of memory: the flow sets the queries down in the raw
    and run folders while dedup's and the classifier's texts are encoded, and reads them back after."""
    import gc

    import rmb_build.embed.encoder as emb
    from rmb_build.pipeline.run import run_local
    from rmb_build.stages.gather import read_queries

    ids = {f"held-{qid}" for qid, _ in TEXTS}
    source = tmp_path / "queries.jsonl"
    source.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"held-{qid}",
                    "conversation": [
                        {"role": r, "content": c} for u in users for r, c in (("user", u), ("assistant", "Sure."))
                    ][:-1],
                }
            )
            + "\n"
            for qid, users in TEXTS
        )
    )
    held_per_pass, encode = [], emb._encode

    ours = {u for _, users in TEXTS for u in users}

    def counting_encode(encoder, texts, *args, **kwargs):
        if ours.intersection(texts):  # a group with the queries' texts (not only the classifier's examples)
            gc.unfreeze()  # the build's give_back freezes what it keeps: get_objects would not list it
            gc.collect()
            held_per_pass.append(sum(1 for o in gc.get_objects() if type(o) is Query and o.source_id in ids))
        return encode(encoder, texts, *args, **kwargs)

    monkeypatch.setattr(emb, "_encode", counting_encode)
    cfg = _cfg(
        sources=[{"kind": "jsonl", "path": str(source), "license": "CC0-1.0"}],
        stages=["gather", "dedup", "classify"],
        name="held",
    )
    out = run_local(parse_config(cfg), tmp_path / "work")

    assert held_per_pass == [0, 0]  # dedup's texts, then the classifier's: both without a query held
    deduped = read_queries(tmp_path / "work" / "runs" / "held" / "deduped.jsonl")
    assert [q.source_id for q in deduped] == ["held-q1", "held-q4", "held-q5", "held-q6"]  # q2, q3: duplicates of q1
    selected = read_queries(tmp_path / "work" / "runs" / "held" / "selected.jsonl")
    assert all(q.scenario_id is None for q in deduped) and out["selected"] == len(selected) > 0
    assert {q.id for q in selected} <= {q.id for q in deduped}


@pytest.mark.torch
def test_audit_and_contamination_reuse_a_store_folder(tmp_path, capsys):
    from rmb_build.cli import main
    from tests.analysis.test_contamination import _release as tiny_release
    from tests.analysis.test_contamination import _train

    root, train, store = tiny_release(tmp_path), _train(tmp_path), tmp_path / "emb"
    plain = tmp_path / "plain.json"
    assert main(["contamination", str(root), str(train), "--threshold", "0.75", "--json", str(plain)]) == 0
    assert "embeddings:" not in capsys.readouterr().out  # no store: as before
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert (
        main(
            [
                "contamination",
                str(root),
                str(train),
                "--threshold",
                "0.75",
                "--json",
                str(first),
                "--embeddings",
                str(store),
            ]
        )
        == 0
    )
    # 2 release prompts not matched exactly, 3 training prompts
    assert "embeddings: 5 distinct texts, 5 encoded" in capsys.readouterr().out
    assert (
        main(
            [
                "contamination",
                str(root),
                str(train),
                "--threshold",
                "0.75",
                "--json",
                str(second),
                "--embeddings",
                str(store),
            ]
        )
        == 0
    )
    assert "embeddings: 5 distinct texts, 0 encoded" in capsys.readouterr().out
    assert (
        json.loads(first.read_text())["items"]
        == json.loads(second.read_text())["items"]
        == json.loads(plain.read_text())["items"]
    )
    # the audit embeds the release's 3 prompts: prompt 0 matched exactly, so it was never embedded
    assert main(["audit", str(root), "--embeddings", str(store)]) == 0
    assert "embeddings: 3 distinct texts, 1 encoded" in capsys.readouterr().out
    assert main(["audit", str(root), "--embeddings", str(store), "--embedding-backend", "tf"]) == 2
    assert "--embedding-backend tf" in capsys.readouterr().err


@pytest.mark.torch
def test_embed_in_groups_keeps_each_text_its_own_row(monkeypatch):
    """``embed`` encodes length-sorted groups (the allocator trimmed between them): with groups of 3,
    every row is still its own text's, as one plain sentence-transformers call gives it."""
    from rmb_build.embed import encoder as embeddings

    texts = [t for _, turns in TEXTS for t in turns] + ["short", "a somewhat longer text about lists " * 4]
    whole = embeddings.load_encoder().encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    monkeypatch.setattr(embeddings, "GROUP_TEXTS", 3)
    grouped = embeddings.embed(texts)
    assert grouped.shape == whole.shape and grouped.dtype == np.float32
    np.testing.assert_allclose(grouped, whole, atol=1e-5)
    assert embeddings.embed([]).shape == (0, whole.shape[1])
