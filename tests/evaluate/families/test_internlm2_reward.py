"""``internlm2-reward``: a tiny randomly initialised look-alike of internlm2-*-reward (its own config class with a
``reward_token_id``; ``InternLM2ForRewardModel`` = backbone ``model`` + ``v_head`` Linear(hidden, 1, bias=False),
loaded through ``AutoModel`` by its ``auto_map``), with SmolLM2's real tokenizer. The look-alike files stand in
for the real remote code, which cannot be fetched here; its backbone is a LlamaModel where the real one is
InternLM2's own (same ``model.`` / ``v_head.`` key layout at the top). Scores are checked against ``v_head``
applied by hand to the backbone's hidden state at the appended reward token, and against the look-alike's own
forward (which, like the real one, reads ``v_head`` at each row's last real token).
"""

from __future__ import annotations

import json

import pytest
from families_helpers import texts, without_tensors
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.families import internlm2_reward
from rmb_build.evaluate.loading import pad, render

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

REWARD_TOKEN = 3  # <repo_name> in SmolLM2's vocabulary: a special token no text holds (the real ones: 92527)

CONFIGURATION = """
from transformers import LlamaConfig


class InternLM2Config(LlamaConfig):
    model_type = "internlm2"

    def __init__(self, reward_token_id=None, **kwargs):
        self.reward_token_id = reward_token_id
        super().__init__(**kwargs)
"""

MODELING = """
import torch
from torch import nn
from transformers import LlamaModel, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast

from .configuration_internlm2 import InternLM2Config


class InternLM2ForRewardModel(PreTrainedModel):
    config_class = InternLM2Config
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.v_head = nn.Linear(config.hidden_size, 1, bias=False)
        self.reward_token_id = config.reward_token_id
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        ends = attention_mask.size(1) - 1 - attention_mask.long().fliplr().argmax(dim=1, keepdim=True)
        assert torch.all(input_ids.gather(1, ends).squeeze(1) == self.reward_token_id)
        values = self.v_head(self.model(input_ids=input_ids, attention_mask=attention_mask)[0]).squeeze(-1)
        return SequenceClassifierOutputWithPast(logits=values.gather(1, ends).squeeze(1))
"""


@pytest.fixture(scope="module")
def internlm(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    folder = tmp_path_factory.mktemp("internlm2-reward")
    (folder / "configuration_internlm2.py").write_text(CONFIGURATION)
    (folder / "modeling_internlm2.py").write_text(MODELING)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "internlm2",
                "architectures": ["InternLM2ForRewardModel"],
                "auto_map": {
                    "AutoConfig": "configuration_internlm2.InternLM2Config",
                    "AutoModel": "modeling_internlm2.InternLM2ForRewardModel",
                },
                "vocab_size": len(tok),
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "max_position_embeddings": 512,
                "reward_token_id": REWARD_TOKEN,
            }
        )
    )
    config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True)
    torch.manual_seed(80)
    model = transformers.AutoModel.from_config(config, trust_remote_code=True)
    with torch.no_grad():
        model.v_head.weight.normal_()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def by_hand(folder, ids):
    saved = safetensors_torch.load_file(str(folder / "model.safetensors"))
    cfg = json.loads((folder / "config.json").read_text())
    keep = {
        k: cfg[k]
        for k in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "max_position_embeddings",
        )
    }
    backbone = transformers.LlamaModel(transformers.LlamaConfig(**keep)).eval()
    backbone.load_state_dict({k[6:]: v for k, v in saved.items() if k.startswith("model.")})
    with torch.inference_mode():
        h = backbone(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
    return float(saved["v_head.weight"][0] @ h)


def test_reward_token_is_appended_and_v_head_read_there(internlm):
    rm = load_rm(f"hf:{internlm}", RMOptions(device="cpu", family="internlm2-reward", trust_remote_code=True))
    ids = rm.encode(texts())
    model = rm._load()
    assert type(model).__name__ == "InternLM2ForRewardModel"
    for text, row in zip(texts(), ids):
        plain = rm.tokenizer(render(rm.tokenizer, text.conversation, text.answer), add_special_tokens=False)
        assert row == plain["input_ids"] + [REWARD_TOKEN]
    assert internlm2_reward.finish_ids(model, rm.tokenizer, ids[0]) == ids[0]  # never twice
    assert len({len(x) for x in ids}) == len(ids)
    want = [by_hand(internlm, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # padded batch
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)
    input_ids, mask = pad(ids, rm.tokenizer.pad_token_id, "cpu")
    with torch.inference_mode():
        own = model(input_ids=input_ids, attention_mask=mask)[0].tolist()
    assert rm.forward(ids) == pytest.approx(own, abs=1e-4)


def test_a_cut_text_keeps_its_reward_token(internlm):
    rm = load_rm(
        f"hf:{internlm}", RMOptions(device="cpu", family="internlm2-reward", trust_remote_code=True, max_length=12)
    )
    ids = rm.encode(texts())
    assert all(len(x) == 12 and x[-1] == REWARD_TOKEN for x in ids) and rm.stats["truncated"] == 3


def test_without_trust_remote_code_it_is_refused(internlm):
    with pytest.raises(RMBError, match=r"add --trust-remote-code"):
        load_rm(f"hf:{internlm}", RMOptions(device="cpu", family="internlm2-reward"))._load()


def test_a_checkpoint_without_its_value_head_is_refused(internlm, tmp_path):
    folder = without_tensors(internlm, tmp_path / "no-head", "v_head.weight")
    rm = load_rm(f"hf:{folder}", RMOptions(device="cpu", family="internlm2-reward", trust_remote_code=True))
    with pytest.raises(RMBError, match=r"1 parameter\(s\) are not in its checkpoint.*: v_head\.weight;") as exc:
        rm._load()
    assert "\n" not in str(exc.value)
