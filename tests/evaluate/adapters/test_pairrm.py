"""pairrm: adapter on a PairRM look-alike.

The real checkpoint (llm-blender/PairRM-hf, DeBERTa-v3-large) cannot be downloaded here, so the model is
a look-alike: a tiny randomly initialised DeBERTa-v2 encoder (hidden 32, 2 layers) under the key names of
the real checkpoint's state dict (``pretrained_model.*`` for the encoder, ``head_layer.1.*`` and
``head_layer.4.*`` for the head's linear layers, as RewardBench's DebertaV2PairRM lays them out), saved by
plain torch/safetensors with a DeBERTa-v2 config.json carrying the prefix-token ids. The tokenizer is a
BERT WordPiece tokenizer built here from a small vocabulary, with PairRM's three special tokens added.
What this checks is the adapter's plumbing (input layout, where the logit is read, loading, votes), not
PairRM's judgements.
"""

from __future__ import annotations

import json
import re
import string

import pytest
from families_helpers import small_release
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Turn
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.adapters.pairrm import CONV_INSTRUCTION
from rmb_build.evaluate.run import evaluate
from rmb_build.evaluate.scoring import collect_pairs

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

SPECIAL = ["<|source|>", "<|candidate1|>", "<|candidate2|>"]


def _tokenizer(folder):
    """A BERT WordPiece tokenizer over characters and a few words, plus PairRM's special tokens."""
    words = [
        "say",
        "hello",
        "hi",
        "there",
        "nice",
        "to",
        "meet",
        "you",
        "no",
        "go",
        "away",
        "hey",
        "name",
        "a",
        "colour",
        "blue",
        "green",
        "like",
        "grass",
        "in",
        "spring",
        "red",
        "another",
        "one",
        "with",
        "reason",
        "user",
        "assistant",
        "response",
        "finish",
        "the",
        "following",
        "coversation",
        "each",
        "i",
        "th",
        "turn",
        "by",
        "filling",
        "your",
    ]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + [f"##{c}" for c in chars] + sorted(set(words))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    tok.add_special_tokens({"additional_special_tokens": SPECIAL})
    tok.save_pretrained(folder)
    return transformers.AutoTokenizer.from_pretrained(folder)


def _look_alike(config):
    """The real checkpoint's module layout, independent of the adapter's own class (a class made on use: torch is
    imported by the tests that run, not when the module is collected)."""

    class _LookAlike(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            h = config.hidden_size
            self.pretrained_model = transformers.DebertaV2Model(config)
            self.head_layer = torch.nn.Sequential(
                torch.nn.Dropout(0.05),
                torch.nn.Linear(2 * h, h),
                torch.nn.Tanh(),
                torch.nn.Dropout(0.05),
                torch.nn.Linear(h, 1),
            )

    return _LookAlike(config)


@pytest.fixture(scope="module")
def pairrm_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pairrm-lookalike")
    tok = _tokenizer(folder)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL}
    config = transformers.DebertaV2Config(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        relative_attention=True,
        position_buckets=256,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        type_vocab_size=0,
        pad_token_id=tok.pad_token_id,
    )
    config.architectures = ["DebertaV2PairRM"]
    config.n_tasks, config.drop_out = 1, 0.05
    config.source_prefix_id, config.cand1_prefix_id, config.cand2_prefix_id = (ids[t] for t in SPECIAL)
    config.sep_token_id = tok.sep_token_id
    torch.manual_seed(0)
    model = _look_alike(config)
    with torch.no_grad():
        # Random weights make the hidden state at <|candidate1|> / <|candidate2|> mostly that token's own
        # embedding, so every pair would get the same verdict; one embedding for both, and stronger layers,
        # let the answers decide.
        emb = model.pretrained_model.embeddings.word_embeddings.weight
        emb[ids["<|candidate2|>"]] = emb[ids["<|candidate1|>"]]
        for param in model.pretrained_model.encoder.parameters():
            if param.dim() == 2:  # initialised at std 0.02, attention barely mixes context in: strengthen it
                param.mul_(15.0)
    config.save_pretrained(folder)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors_torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def _hand_logit(folder, conversation_source: str, a: str, b: str) -> float:
    """PairRM's logit that ``a`` beats ``b``: ids built by hand, the encoder from the saved weights, the head
    in plain torch."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    config = transformers.DebertaV2Config.from_pretrained(folder)
    weights = safetensors_torch.load_file(str(folder / "model.safetensors"))
    encoder = transformers.DebertaV2Model(config).eval()
    prefix = "pretrained_model."
    encoder.load_state_dict({k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}, strict=True)
    ids = (
        tok.encode("<|source|>" + conversation_source)
        + tok.encode("<|candidate1|>" + a)
        + tok.encode("<|candidate2|>" + b)
    )
    with torch.no_grad():
        hidden = encoder(input_ids=torch.tensor([ids])).last_hidden_state[0]

    def head(x):
        x = torch.tanh(x @ weights["head_layer.1.weight"].T + weights["head_layer.1.bias"])
        return x @ weights["head_layer.4.weight"].T + weights["head_layer.4.bias"]

    src, c1, c2 = (
        hidden[ids.index(config.source_prefix_id)],
        hidden[ids.index(config.cand1_prefix_id)],
        hidden[ids.index(config.cand2_prefix_id)],
    )
    return float((head(torch.cat([src, c1])) - head(torch.cat([src, c2]))).mean())


def test_checkpoint_without_head_is_refused_in_one_line(pairrm_dir, tmp_path):
    import shutil

    bare = tmp_path / "no-head"
    shutil.copytree(pairrm_dir, bare)
    weights = safetensors_torch.load_file(str(bare / "model.safetensors"))
    safetensors_torch.save_file(
        {k: v for k, v in weights.items() if not k.startswith("head_layer.")},
        str(bare / "model.safetensors"),
        metadata={"format": "pt"},
    )
    rm = load_rm(f"pairrm:{bare}", RMOptions(device="cpu"))
    pair = collect_pairs(list(small_release().items()))[:1]
    with pytest.raises(RMBError) as err:
        list(rm.judge_stream(pair))
    msg = str(err.value)
    assert "\n" not in msg and "head_layer.1.weight" in msg and "randomly initialised" in msg


def test_tokenizer_without_special_tokens_is_refused(tmp_path):
    tok = _tokenizer(tmp_path)
    plain = transformers.BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt"))
    plain.save_pretrained(tmp_path / "plain")
    (tmp_path / "plain" / "config.json").write_text("{}")
    assert len(tok) > len(plain)
    with pytest.raises(RMBError, match=re.escape("lacks PairRM's special token(s) <|source|>")):
        load_rm(f"pairrm:{tmp_path / 'plain'}", RMOptions(device="cpu"))


def test_logit_matches_hand_computation_in_both_orders(pairrm_dir):
    rm = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu", batch_size=1))
    conversation = (Turn("user", "Say hello."),)
    a, b = "Hello!", "Hi there, nice to meet you."
    got = rm.logits([rm.encode(conversation, a, b), rm.encode(conversation, b, a)])
    want = [_hand_logit(pairrm_dir, "Say hello.", a, b), _hand_logit(pairrm_dir, "Say hello.", b, a)]
    assert got == pytest.approx(want, abs=1e-5)
    assert got[0] != pytest.approx(-got[1], abs=1e-6)  # the two orders are two forward passes, not one negated

    # A multi-turn conversation: llm-blender's conversation format, earlier assistant turns in both candidates.
    multi = (Turn("user", "Name a colour."), Turn("assistant", "Blue."), Turn("user", "Another one?"))
    source = (
        CONV_INSTRUCTION + "USER: Name a colour.\nAssistant: <Response 1>\nUSER: Another one?\nAssistant: <Response 2>"
    )
    ca, cb = "<Response 1>: Blue.\n<Response 2>: Green.", "<Response 1>: Blue.\n<Response 2>: Red."
    got = rm.logits([rm.encode(multi, "Green.", "Red.")])
    assert got == pytest.approx([_hand_logit(pairrm_dir, source, ca, cb)], abs=1e-5)


def test_batched_votes_match_unbatched_logits(pairrm_dir):
    pairs = collect_pairs(list(small_release().items()))
    batched = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu", batch_size=3))
    single = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu", batch_size=1))
    votes = {}
    for idx, vs in batched.judge_stream(pairs):
        votes.update({pairs[i].key: v for i, v in zip(idx, vs)})
    for p in pairs:
        ab, ba = single.logits(
            [single.encode(p.conversation, p.first, p.second), single.encode(p.conversation, p.second, p.first)]
        )
        assert votes[p.key] == {"ab": [int(ab > 0)], "ba": [int(ba > 0)]}


def test_evaluate_outcomes_follow_votes(pairrm_dir, tmp_path):
    release = small_release()
    rm = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu", batch_size=2))
    assert rm.compares_pairs
    results = evaluate(release, rm, tmp_path / "out", tmp_path / "cache", progress=False)
    preds = [json.loads(x) for x in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 4
    fresh = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu"))
    items = {(i.set_name, i.uid): i for i in release.items()}
    seen_votes = set()
    for p in preds:
        item = items[(p["set"], p["uid"])]
        answers = item.answers()
        assert len(p["votes"]) == len(answers) - 1
        wins = []
        for worse, votes in zip(answers[1:], p["votes"]):
            ab, ba = fresh.logits(
                [
                    fresh.encode(item.conversation, answers[0].answer, worse.answer),
                    fresh.encode(item.conversation, worse.answer, answers[0].answer),
                ]
            )
            assert votes == {"ab": [int(ab > 0)], "ba": [int(ba > 0)]}
            seen_votes.add((int(ab > 0), int(ba > 0)))
            better, other = int(ab > 0) + int(ba <= 0), int(ab <= 0) + int(ba > 0)
            wins.append(better > other)
        if p["set"] == "pairwise":
            c, r = p["scores"]["chosen"], p["scores"]["rejected"]
            assert c + r == 2 and p["outcome"] == (1.0 if c > r else 0.0) == float(wins[0])
        else:
            assert p["outcome"] == float(all(wins))
    assert len(seen_votes) > 1  # the look-alike's verdicts are not all alike
    assert results["scoring"]["unique"] == 5 and results["scoring"]["scored"] == 5
    again = evaluate(
        release,
        load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu")),
        tmp_path / "out2",
        tmp_path / "cache",
        progress=False,
    )
    assert again["scoring"]["cached"] == 5 and again["scoring"]["scored"] == 0
    assert again["pairwise"] == results["pairwise"]


def test_fingerprint_depends_on_max_length_and_truncation_is_counted(pairrm_dir):
    short = load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu", max_length=40))
    assert short.fingerprint() != load_rm(f"pairrm:{pairrm_dir}", RMOptions(device="cpu")).fingerprint()
    ids, (p0, p1, p2) = short.encode((Turn("user", "Say hello."),), "Hey " * 30, "Hello!")
    assert len(ids) <= 40 and short.stats["truncated"] == 1
    assert [ids[p] for p in (p0, p1, p2)] == [short.prefix_ids[t] for t in SPECIAL]


def test_a_nan_logit_is_refused_not_counted_as_a_loss(pairrm_dir, tmp_path):
    """A head that gives NaN: the scoring loop refuses the vote in one line naming the item (before, NaN > 0 was
    False and every pair a silent loss in both orders)."""
    import shutil

    broken = tmp_path / "nan-head"
    shutil.copytree(pairrm_dir, broken)
    weights = safetensors_torch.load_file(str(broken / "model.safetensors"))
    weights["head_layer.4.bias"] = torch.full_like(weights["head_layer.4.bias"], float("nan"))
    safetensors_torch.save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    rm = load_rm(f"pairrm:{broken}", RMOptions(device="cpu"))
    with pytest.raises(RMBError) as err:
        evaluate(small_release(), rm, tmp_path / "out", tmp_path / "cache", progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "gave a vote of NaN for pairwise item 0" in msg and "'chosen vs reject'" in msg, msg
    assert not (tmp_path / "out").exists()
