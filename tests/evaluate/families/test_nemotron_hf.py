"""``nemotron-hf``: a tiny randomly initialised LlamaForCausalLM (Nemotron-70B-Reward-HF's class) with SmolLM2's
real tokenizer. The reward is the logit of token id 0 at the first generation step after the rendered answer:
checked against the LM head's row 0 applied by hand to the backbone's last hidden state, and against the
model card's way (generate one token, read that step's logit for id 0).
"""

from __future__ import annotations

import pytest
from families_helpers import last_hidden, save_lookalike, texts, tiny_config, without_tensors
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml


@pytest.fixture(scope="module")
def nemotron(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    config = tiny_config(transformers.LlamaConfig, len(tok), tie_word_embeddings=False)
    torch.manual_seed(60)
    model = transformers.LlamaForCausalLM(config)
    return save_lookalike(tmp_path_factory.mktemp("nemotron"), model, tok)


def by_hand(folder, ids):
    """lm_head.weight[0] . (final hidden state at the last token), the backbone run on the unpadded text."""
    h, saved = last_hidden(folder, "model", ids, transformers.LlamaModel)
    return float(saved["lm_head.weight"][0] @ h)


def as_the_card_does(folder, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    out = model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=1,
        do_sample=False,
        return_dict_in_generate=True,
        output_logits=True,
    )
    return float(out.logits[0][0, 0])


def test_reward_is_the_logit_of_id_0_after_the_answer(nemotron):
    rm = load_rm(f"hf:{nemotron}", RMOptions(device="cpu", family="nemotron-hf"))
    ids = rm.encode(texts())
    assert len({len(x) for x in ids}) == len(ids)
    want = [by_hand(nemotron, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # padded batch
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)
    assert as_the_card_does(nemotron, ids[0]) == pytest.approx(want[0], abs=1e-4)


def test_a_checkpoint_without_its_lm_head_is_refused(nemotron, tmp_path):
    folder = without_tensors(nemotron, tmp_path / "no-head", "lm_head.weight")
    with pytest.raises(RMBError, match=r"1 parameter\(s\) are not in its checkpoint.*: lm_head\.weight;") as exc:
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="nemotron-hf"))._load()
    assert "\n" not in str(exc.value)
