"""Scores that do not depend on the batch: in fp32, every family's scores (and the dpo: and pairrm: adapters')
are the same, bit for bit, at batch sizes 1, 4 and 32, on each family's tiny randomly initialised look-alike
(the fixtures of its own test module). A text's batch decides its padding and how many rows share each matrix
product; neither may move its score.

On a CPU a matrix product's kernel is chosen by its shape, and a reward head read at one token per text (one
output column, or one to three rows) gave a row a result that depended on how many rows shared the call (a
Llama classifier's scores moved by up to 3e-8 between batch sizes 1 and 4 before heads ran row by row)."""

from __future__ import annotations

import pytest
from families_helpers import small_release
from lazy_modules import importorskip_on_use

from rmb_build.core.items import Turn
from rmb_build.evaluate.adapters import RMOptions, ScoreText, load_rm
from rmb_build.evaluate.families import families
from rmb_build.evaluate.scoring import collect_pairs
from tests.evaluate.adapters.test_hf_dpo import tiny_policy, tiny_reference, tiny_rm  # noqa: F401 (fixtures)
from tests.evaluate.adapters.test_pairrm import pairrm_dir  # noqa: F401
from tests.evaluate.families.test_first_output import worldpm  # noqa: F401
from tests.evaluate.families.test_inf_orm import inform  # noqa: F401
from tests.evaluate.families.test_internlm2_reward import internlm  # noqa: F401
from tests.evaluate.families.test_ldl_reward import ldl  # noqa: F401
from tests.evaluate.families.test_nemotron_hf import nemotron  # noqa: F401
from tests.evaluate.families.test_output_field import armo  # noqa: F401
from tests.evaluate.families.test_sequence_classifier import qwen3_rm  # noqa: F401
from tests.evaluate.families.test_value_head import eurus, grm, starling  # noqa: F401

importorskip_on_use("torch")
importorskip_on_use("transformers")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

SIZES = (1, 4, 32)
WORDS = "the quick brown fox jumps over the lazy dog while a cat watches from the warm window".split()

# family -> (its look-alike fixture, the options its own tests load it with)
LOOKALIKES = {
    "sequence-classifier": [("qwen3_rm", {}), ("tiny_rm", {})],
    "first-output": [("worldpm", {"trust_remote_code": True})],
    "inf-orm": [("inform", {})],
    "internlm2-reward": [("internlm", {"trust_remote_code": True})],
    "ldl-reward": [("ldl", {"attn_implementation": "eager"})],
    "nemotron-hf": [("nemotron", {})],
    "output-field": [("armo", {"trust_remote_code": True})],
    "value-head": [("starling", {}), ("eurus", {"trust_remote_code": True}), ("grm", {"trust_remote_code": True})],
}
CASES = [(name, fixture, options) for name, rows in LOOKALIKES.items() for fixture, options in rows]


def batch_texts(n: int = 40) -> list[ScoreText]:
    """``n`` texts of 1 to 40 words, single- and multi-turn: batches of 4 and 32 hold mixed widths."""
    out = []
    for i in range(n):
        answer = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(1 + (i * 7) % 40))
        conv = (Turn("user", f"Question {i}: {WORDS[i % len(WORDS)]}?"),)
        if i % 3 == 0:
            conv = (Turn("user", "Name an animal."), Turn("assistant", WORDS[i % 9]), *conv)
        out.append(ScoreText(f"t{i}", conv, answer))
    return out


def scores_at(spec: str, texts: list[ScoreText], batch_size: int, **options) -> dict[str, float]:
    rm = load_rm(spec, RMOptions(device="cpu", dtype="fp32", batch_size=batch_size, **options))
    out: dict[str, float] = {}
    for idx, values in rm.score_stream(texts):
        out.update({texts[i].key: v for i, v in zip(idx, values)})
    return out


def test_every_family_is_checked():
    assert set(LOOKALIKES) == set(families())


@pytest.mark.slow  # every family's look-alike, scored three times
@pytest.mark.parametrize("family, fixture, options", CASES, ids=[f"{n}-{f}" for n, f, _ in CASES])
def test_a_familys_fp32_scores_are_the_same_at_every_batch_size(request, family, fixture, options):
    folder = request.getfixturevalue(fixture)
    texts = batch_texts()
    got = {bs: scores_at(f"hf:{folder}", texts, bs, family=family, **options) for bs in SIZES}
    assert len(got[1]) == len(texts)
    for bs in SIZES[1:]:
        moved = {k: got[bs][k] - got[1][k] for k in got[1] if got[bs][k] != got[1][k]}
        assert not moved, f"{family} at batch size {bs}: {len(moved)} scores moved, e.g. {next(iter(moved.items()))}"


def test_the_default_classifier_is_batch_invariant(tiny_rm):  # noqa: F811 (the quick tier's check)
    texts = batch_texts(9)
    assert scores_at(f"hf:{tiny_rm}", texts, 1) == scores_at(f"hf:{tiny_rm}", texts, 4)


@pytest.mark.slow
def test_dpo_rewards_are_the_same_at_every_batch_size(tiny_policy, tiny_reference):  # noqa: F811
    texts = batch_texts(33)
    got = {bs: scores_at(f"dpo:{tiny_policy},{tiny_reference}", texts, bs) for bs in SIZES}
    assert got[4] == got[1] and got[32] == got[1]


@pytest.mark.slow
def test_pairrm_logits_are_the_same_at_every_batch_size(pairrm_dir):  # noqa: F811
    pairs = collect_pairs(list(small_release().items()))
    pairs = pairs * 9  # 36 pairs: the same encodings in batches of every size
    got = {}
    for bs in SIZES:
        rm = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu", dtype="fp32", batch_size=bs))
        got[bs] = rm.logits([rm.encode(p.conversation, p.first, p.second) for p in pairs])
    assert got[4] == got[1] and got[32] == got[1]


def _evaluate(folder, tmp_path, name, release=None, cache="cache", **options):
    """evaluate() of ``hf:folder`` on the small release; (results.json, each item's scores)."""
    import json

    from rmb_build.evaluate.run import evaluate

    rm = load_rm(f"hf:{folder}", RMOptions(device="cpu", **options))
    results = evaluate(release or small_release(), rm, tmp_path / name, tmp_path / cache, progress=False)
    preds = [json.loads(x) for x in (tmp_path / name / "predictions.jsonl").read_text().splitlines()]
    return results, {(p["set"], p["uid"]): p["scores"] for p in preds}


@pytest.mark.slow  # four evaluations of the tiny model
def test_results_say_how_far_batching_moved_a_rescored_sample(tiny_rm, tmp_path):  # noqa: F811
    fp32, _ = _evaluate(tiny_rm, tmp_path, "fp32", dtype="fp32", batch_size=4, cache="c32")
    check = fp32["scoring"]["batch_check"]
    assert check["rescored"] > 0 and check["batch_size"] == 4 and check["dtype"] == "fp32"
    assert check["differ"] == 0 and check["max_abs_diff"] == 0.0  # fp32: the same alone as in a batch
    half, batched = _evaluate(tiny_rm, tmp_path, "bf16", dtype="bf16", batch_size=4, cache="c16")
    check = half["scoring"]["batch_check"]
    assert check["rescored"] > 0 and check["dtype"] == "bf16" and 0 <= check["differ"] <= check["rescored"]
    _, alone = _evaluate(tiny_rm, tmp_path, "bf16-alone", dtype="bf16", batch_size=1, cache="c16-1")
    moved = [abs(a - b) for k in alone for a, b in zip(_flat(alone[k]), _flat(batched[k]))]
    assert check["max_abs_diff"] <= max(moved)  # a sample of what batching did to every text
    assert "Batch check:" in (tmp_path / "bf16" / "report.md").read_text()


def _flat(scores: dict) -> list[float]:
    return [scores["chosen"], scores["rejected"]] if "chosen" in scores else [scores["best"], *scores["losers"]]


@pytest.mark.slow  # four evaluations of the tiny model
def test_deterministic_scores_are_the_same_whatever_the_batch_size_or_the_cache(tiny_rm, tmp_path):  # noqa: F811
    from rmb_build.release.read import Release

    det = dict(dtype="bf16", deterministic=True)
    four, a = _evaluate(tiny_rm, tmp_path, "a", batch_size=4, cache="c1", **det)
    _, b = _evaluate(tiny_rm, tmp_path, "b", batch_size=32, cache="c2", **det)
    assert a == b
    # an interrupted run: one item scored first, the rest on a later run, as a fresh run scores them
    first = Release(name="small", root=None)
    first.add(small_release().pairwise[0])
    _evaluate(tiny_rm, tmp_path, "part", release=first, batch_size=4, cache="c3", **det)
    resumed, c = _evaluate(tiny_rm, tmp_path, "c", batch_size=4, cache="c3", **det)
    assert resumed["scoring"]["cached"] == 2 and c == a
    assert four["scoring"]["batch_check"] == {
        "rescored": 0,
        "batch_size": 1,
        "dtype": "bf16",
        "note": "every text was scored alone",
    }
    plain, _ = _evaluate(tiny_rm, tmp_path, "plain", dtype="bf16", batch_size=4, cache="c1")
    assert plain["fingerprint"] != four["fingerprint"]  # batched bf16 scores are never read as deterministic ones
