"""``value-head``: tiny randomly initialised checkpoints with the real models' parameter names (Starling-RM-34B:
``transformer.*`` + ``v_head.weight``; UltraRM / Eurus-RM: ``model.*`` + ``regression_head.weight``; GRM sftreg:
``model.*`` + ``v_head.summary.*``), written as safetensors with SmolLM2's real tokenizer. Scores are checked
against the head computed by hand (torch ops on the saved tensors) on an unpadded forward of the backbone.
"""

from __future__ import annotations

import json

import pytest
from families_helpers import HIDDEN, last_hidden, texts, tiny_config, without_tensors
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml


def write_checkpoint(folder, config, backbone_prefix: str, head: dict, tok, seed: int):
    """A random backbone's weights under ``backbone_prefix.`` plus ``head``, as one model.safetensors."""
    torch.manual_seed(seed)
    backbone = transformers.AutoModel.from_config(config)
    tensors = {f"{backbone_prefix}.{k}": v.contiguous() for k, v in backbone.state_dict().items()}
    tensors.update(head)
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    safetensors_torch.save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tok.save_pretrained(folder)  # the tokenizer the caller read (for its length), not read again: 0.3 s of CPU
    return folder


def check_scores(rm, reference):
    """Batched (right-padded, mixed lengths) and one-at-a-time scores both equal ``reference(ids)``."""
    ids = rm.encode(texts())
    assert len({len(x) for x in ids}) == len(ids)  # every batch below is padded
    want = [reference(x) for x in ids]
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)
    assert len({round(w, 6) for w in want}) == len(want)  # the texts' rewards differ: positions matter


@pytest.fixture(scope="module")
def starling(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    config = tiny_config(transformers.LlamaConfig, len(tok), architectures=["LlamaForSequenceClassification"])
    torch.manual_seed(10)
    head = {"v_head.weight": torch.randn(1, HIDDEN)}
    return write_checkpoint(tmp_path_factory.mktemp("starling"), config, "transformer", head, tok, 11)


def test_starling_v_head_at_the_last_token(starling):
    rm = load_rm(f"hf:{starling}", RMOptions(device="cpu", family="value-head"))
    model = rm._load()
    assert model.rmb_variant == "starling" and hasattr(model, "transformer")

    def reference(ids):
        h, saved = last_hidden(starling, "transformer", ids)
        return float(saved["v_head.weight"][0] @ h)

    check_scores(rm, reference)


def test_starling_7b_layout_with_a_second_copy_of_the_backbone_loads(starling, tmp_path):
    """Starling-RM-7B-alpha's state dict holds the backbone twice (``model.model.*`` of its causal LM and
    ``transformer.*``, the same module): the ``transformer.*`` copy and ``v_head`` are what is read."""
    import shutil

    folder = tmp_path / "starling-7b"
    shutil.copytree(starling, folder)
    saved = safetensors_torch.load_file(str(folder / "model.safetensors"))
    saved.update(
        {
            "model." + k.replace("transformer.", "model.", 1): v.clone() * 0
            for k, v in saved.items()
            if k.startswith("transformer.")
        }
    )
    safetensors_torch.save_file(saved, str(folder / "model.safetensors"), metadata={"format": "pt"})
    got = load_rm(f"hf:{folder}", RMOptions(device="cpu", family="value-head"))
    plain = load_rm(f"hf:{starling}", RMOptions(device="cpu", family="value-head"))
    ids = got.encode(texts())
    assert ids == plain.encode(texts())
    assert got.forward(ids) == pytest.approx(plain.forward(ids), abs=1e-6)


@pytest.fixture(scope="module")
def eurus(smol_tokenizer, tmp_path_factory):
    """Eurus-RM-7b's layout (a Mistral backbone) with the auto_map its real checkpoint ships; the look-alike
    modelling file stands in for its real remote code, which cannot be fetched here. The family builds its own
    head and does not run that code."""
    tok = smol_tokenizer
    config = tiny_config(
        transformers.MistralConfig,
        len(tok),
        architectures=["EurusRewardModel"],
        auto_map={"AutoModel": "modeling_eurus_rm.EurusRewardModel"},
    )
    torch.manual_seed(20)
    head = {"regression_head.weight": torch.randn(1, HIDDEN)}
    folder = write_checkpoint(tmp_path_factory.mktemp("eurus"), config, "model", head, tok, 21)
    (folder / "modeling_eurus_rm.py").write_text(
        "import torch\nfrom torch import nn\nfrom transformers import MistralModel, PreTrainedModel, MistralConfig\n\n"
        "class EurusRewardModel(PreTrainedModel):\n"
        "    config_class = MistralConfig\n\n"
        "    def __init__(self, config):\n"
        "        super().__init__(config)\n"
        "        self.model = MistralModel(config)\n"
        "        self.regression_head = nn.Linear(config.hidden_size, 1, bias=False)\n"
        "        self.post_init()\n\n"
        "    def forward(self, input_ids=None, attention_mask=None, **kw):\n"
        "        rewards = self.regression_head(self.model(input_ids, attention_mask=attention_mask)[0]).squeeze(-1)\n"
        "        ends = attention_mask.cumsum(dim=1).argmax(dim=1).view(-1, 1)\n"
        "        return torch.gather(rewards, 1, ends)\n"
    )
    return folder


def test_eurus_regression_head_matches_hand_computation_and_its_own_code(eurus):
    rm = load_rm(f"hf:{eurus}", RMOptions(device="cpu", family="value-head", trust_remote_code=True))
    model = rm._load()
    assert model.rmb_variant == "regression-head" and type(model).__name__ == "MistralModelWithRegressionHead"

    def reference(ids):
        h, saved = last_hidden(eurus, "model", ids)
        return float(saved["regression_head.weight"][0] @ h)

    check_scores(rm, reference)
    own = transformers.AutoModel.from_pretrained(eurus, trust_remote_code=True).eval()
    ids = rm.encode(texts())
    from rmb_build.evaluate.loading import pad

    input_ids, mask = pad(ids, rm.tokenizer.pad_token_id, "cpu")
    with torch.inference_mode():
        theirs = own(input_ids=input_ids, attention_mask=mask)[:, 0].tolist()
    assert rm.forward(ids) == pytest.approx(theirs, abs=1e-4)


@pytest.fixture(scope="module")
def grm(smol_tokenizer, tmp_path_factory):
    """GRM sftreg's layout: ``v_head.summary`` = Linear(hidden, 16), ReLU, Linear(16, 1) as its config says."""
    tok = smol_tokenizer
    config = tiny_config(
        transformers.LlamaConfig, len(tok), vhead_layer_type="mlp", vhead_num_neurons=16, vhead_num_layers=1
    )
    torch.manual_seed(30)
    head = {
        "v_head.summary.0.weight": torch.randn(16, HIDDEN),
        "v_head.summary.0.bias": torch.randn(16),
        "v_head.summary.2.weight": torch.randn(1, 16),
        "v_head.summary.2.bias": torch.randn(1),
    }
    return write_checkpoint(tmp_path_factory.mktemp("grm"), config, "model", head, tok, 31)


def test_grm_mlp_value_head(grm):
    rm = load_rm(f"hf:{grm}", RMOptions(device="cpu", family="value-head", trust_remote_code=True))
    assert rm._load().rmb_variant == "grm"

    def reference(ids):
        h, s = last_hidden(grm, "model", ids)
        inner = torch.relu(s["v_head.summary.0.weight"] @ h + s["v_head.summary.0.bias"])
        return float(s["v_head.summary.2.weight"][0] @ inner + s["v_head.summary.2.bias"][0])

    check_scores(rm, reference)


def test_grm_linear_value_head(smol_tokenizer, tmp_path):
    tok = smol_tokenizer
    config = tiny_config(transformers.LlamaConfig, len(tok), vhead_layer_type="linear")
    torch.manual_seed(40)
    head = {"v_head.summary.weight": torch.randn(1, HIDDEN), "v_head.summary.bias": torch.randn(1)}
    folder = write_checkpoint(tmp_path / "grm-linear", config, "model", head, tok, 41)
    rm = load_rm(f"hf:{folder}", RMOptions(device="cpu", family="value-head"))

    def reference(ids):
        h, s = last_hidden(folder, "model", ids)
        return float(s["v_head.summary.weight"][0] @ h + s["v_head.summary.bias"][0])

    check_scores(rm, reference)


def _drop(folder, tmp_path, *names):
    return without_tensors(folder, tmp_path / f"{folder.name}-without-head", *names)


def test_a_missing_head_weight_is_refused_in_one_line(grm, starling, tmp_path):
    """A GRM checkpoint lacking one weight of its head: the load check names it. A checkpoint with no head
    this family knows (Starling's v_head deleted): refused before loading, naming the expected keys."""
    rm = load_rm(f"hf:{_drop(grm, tmp_path, 'v_head.summary.2.weight')}", RMOptions(device="cpu", family="value-head"))
    with pytest.raises(
        RMBError, match=r"1 parameter\(s\) are not in its checkpoint.*v_head\.summary\.2\.weight"
    ) as exc:
        rm._load()
    assert "\n" not in str(exc.value)
    rm = load_rm(f"hf:{_drop(starling, tmp_path, 'v_head.weight')}", RMOptions(device="cpu", family="value-head"))
    with pytest.raises(
        RMBError, match=r"no value head this family knows \(v_head\.weight, regression_head\.weight"
    ) as exc:
        rm._load()
    assert "\n" not in str(exc.value)


def test_an_unknown_backbone_is_refused(starling, tmp_path):
    import shutil

    folder = tmp_path / "odd"
    shutil.copytree(starling, folder)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "no-such-architecture"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(RMBError, match=r"model_type 'no-such-architecture' is not an architecture transformers knows"):
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="value-head"))._load()
