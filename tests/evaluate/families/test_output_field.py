"""``output-field``: a tiny randomly initialised look-alike of ArmoRM-Llama3-8B-v0.1 (``model.*`` LlamaModel,
``regression_layer`` per objective, a ``gating`` network read at the last assistant header, a
``reward_transform_matrix``; its forward returns ``rewards`` per objective and the gated ``score``), with
SmolLM2's real tokenizer. The look-alike modelling file stands in for ArmoRM's real remote code, which cannot
be fetched here; like it, it finds each row's end as the token before the first ``config.pad_token_id``.
Scores are checked against the same computation by hand (torch ops on the saved tensors).
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest
from families_helpers import texts, tiny_config, without_tensors
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.families import output_field

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

OBJECTIVES, GATE = 5, 16

MODELING = """
import torch
from torch import nn
from transformers import LlamaConfig, LlamaModel, LlamaPreTrainedModel
from transformers.utils import ModelOutput
from dataclasses import dataclass

PATTERN = {pattern}  # the assistant header, where the gating network reads the prompt (ArmoRM: Llama 3's)


@dataclass
class RewardOutput(ModelOutput):
    rewards: torch.FloatTensor = None
    gating_output: torch.FloatTensor = None
    score: torch.FloatTensor = None


class Gating(nn.Module):
    def __init__(self, hidden, objectives, width, temperature):
        super().__init__()
        self.temperature = temperature
        self.logit_scale = nn.Parameter(torch.ones(1))
        self.layers = nn.ModuleList([nn.Linear(hidden, width, bias=False), nn.ReLU(), nn.BatchNorm1d(width),
                                     nn.Linear(width, objectives, bias=True)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return torch.softmax(x / self.temperature, dim=1) * self.logit_scale[0]


def gate_position(ids):
    for j in range(len(ids) - len(PATTERN), -1, -1):
        if ids[j:j + len(PATTERN)] == PATTERN:
            return j
    raise ValueError("no assistant header")


class LlamaForRewardModelWithGating(LlamaPreTrainedModel):
    config_class = LlamaConfig

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.regression_layer = nn.Linear(config.hidden_size, config.num_objectives, bias=False)
        self.reward_transform_matrix = nn.Parameter(torch.eye(config.num_objectives), requires_grad=False)
        self.gating = Gating(config.hidden_size, config.num_objectives, config.gating_hidden_dim,
                             config.gating_temperature)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids, attention_mask=attention_mask)[0]
        rows = torch.arange(input_ids.shape[0])
        ends = (torch.eq(input_ids, self.config.pad_token_id).int().argmax(-1) - 1) % input_ids.shape[-1]
        rewards = self.regression_layer(hidden[rows, ends])
        prompt = hidden[rows, [gate_position(ids.tolist()) for ids in input_ids]]
        gating_output = self.gating(prompt)
        adjusted = rewards @ self.reward_transform_matrix
        return RewardOutput(rewards=adjusted, gating_output=gating_output,
                            score=(gating_output * adjusted).sum(dim=1, keepdim=True))
"""


def header(tok):
    return tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def armo(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    folder = tmp_path_factory.mktemp("armo")
    (folder / "modeling_custom.py").write_text(MODELING.format(pattern=header(tok)))
    spec = importlib.util.spec_from_file_location("armo_lookalike", folder / "modeling_custom.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = tiny_config(
        transformers.LlamaConfig,
        len(tok),
        num_objectives=OBJECTIVES,
        gating_hidden_dim=GATE,
        gating_temperature=10.0,
        architectures=["LlamaForRewardModelWithGating"],
        auto_map={"AutoModelForSequenceClassification": "modeling_custom.LlamaForRewardModelWithGating"},
    )
    torch.manual_seed(70)
    model = module.LlamaForRewardModelWithGating(config)
    with torch.no_grad():
        model.regression_layer.weight.normal_()
        model.reward_transform_matrix.copy_(torch.randn(OBJECTIVES, OBJECTIVES))
        norm = model.gating.layers[2]
        norm.running_mean.normal_()
        norm.running_var.uniform_(0.5, 2.0)
        norm.weight.normal_()
        norm.bias.normal_()
        model.gating.layers[3].weight.normal_()
        model.gating.logit_scale.fill_(3.0)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def by_hand(folder, tok, ids):
    s = safetensors_torch.load_file(str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    backbone = transformers.LlamaModel(transformers.LlamaConfig.from_pretrained(folder)).eval()
    backbone.load_state_dict({k[6:]: v for k, v in s.items() if k.startswith("model.")})
    with torch.inference_mode():
        hidden = backbone(input_ids=torch.tensor([ids])).last_hidden_state[0]
    rewards = (s["regression_layer.weight"] @ hidden[-1]) @ s["reward_transform_matrix"]
    pattern = header(tok)
    at = max(j for j in range(len(ids)) if ids[j : j + len(pattern)] == pattern)
    x = torch.relu(s["gating.layers.0.weight"] @ hidden[at])
    x = (x - s["gating.layers.2.running_mean"]) / torch.sqrt(s["gating.layers.2.running_var"] + 1e-5)
    x = x * s["gating.layers.2.weight"] + s["gating.layers.2.bias"]
    x = s["gating.layers.3.weight"] @ x + s["gating.layers.3.bias"]
    gate = torch.softmax(x / config["gating_temperature"], dim=0) * s["gating.logit_scale"][0]
    return float((gate * rewards).sum())


def test_armorm_score_field_batched_and_unbatched(armo):
    rm = load_rm(f"hf:{armo}", RMOptions(device="cpu", family="output-field", trust_remote_code=True))
    ids = rm.encode(texts())
    model = rm._load()
    assert type(model).__name__ == "LlamaForRewardModelWithGating"
    pad = rm.tokenizer.pad_token_id
    assert all(pad in x for x in ids)  # the tokenizer pads with <|im_end|>, which every text holds
    assert len({len(x) for x in ids}) == len(ids)
    want = [by_hand(armo, rm.tokenizer, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # padded batch
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)
    assert model.config.pad_token_id == pad  # restored after each call


def test_without_trust_remote_code_it_is_refused(armo):
    with pytest.raises(RMBError, match=r"add --trust-remote-code"):
        load_rm(f"hf:{armo}", RMOptions(device="cpu", family="output-field"))._load()


def test_a_checkpoint_without_its_regression_layer_is_refused(armo, tmp_path):
    folder = without_tensors(armo, tmp_path / "no-head", "regression_layer.weight")
    rm = load_rm(f"hf:{folder}", RMOptions(device="cpu", family="output-field", trust_remote_code=True))
    with pytest.raises(
        RMBError, match=r"1 parameter\(s\) are not in its checkpoint.*: regression_layer\.weight;"
    ) as exc:
        rm._load()
    assert "\n" not in str(exc.value)


def test_field_order_and_shapes():
    t = torch.tensor
    both = SimpleNamespace(score=t([[1.0], [2.0]]), rewards=t([[5.0, 6.0], [7.0, 8.0]]), logits=None)
    assert output_field.reward_field(both, 2).tolist() == [1.0, 2.0]
    assert output_field.reward_field({"rewards": t([3.0, 4.0])}, 2).tolist() == [3.0, 4.0]
    assert output_field.reward_field(SimpleNamespace(logits=t([[0.5], [0.25]])), 2).tolist() == [0.5, 0.25]
    with pytest.raises(RMBError, match=r"field 'rewards' holds 2 values per text"):
        output_field.reward_field(SimpleNamespace(rewards=t([[5.0, 6.0], [7.0, 8.0]])), 2)
    with pytest.raises(RMBError, match=r"none of the fields score, rewards, logits"):
        output_field.reward_field(SimpleNamespace(hidden=t([1.0])), 1)


def test_free_pad_id_keeps_a_free_config_pad_and_otherwise_takes_an_unused_id():
    model = SimpleNamespace(
        config=SimpleNamespace(pad_token_id=1, vocab_size=4),
        get_input_embeddings=lambda: SimpleNamespace(num_embeddings=4),
    )
    ids, mask = torch.tensor([[0, 2, 1], [2, 0, 0]]), torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert output_field.free_pad_id(model, ids, mask) == 1  # the 1 in row 0 is padding
    assert output_field.free_pad_id(model, ids, torch.ones_like(mask)) == 3
    with pytest.raises(RMBError, match="no id is left"):
        output_field.free_pad_id(model, torch.tensor([[0, 1, 2, 3]]), torch.ones(1, 4, dtype=torch.long))
