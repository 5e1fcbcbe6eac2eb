"""``ldl-reward``: a tiny randomly initialised look-alike of LDL-Reward-Gemma-2-27B as reward-bench's
LDLRewardModel27B reads it (a Gemma2Model checkpoint, ``regression_layer.pt`` and ``gating_layer.pt`` with small
widths), with SmolLM2's real tokenizer. Scores are checked against the heads computed by hand (torch ops on the
saved tensors) on an unpadded backbone forward."""

from __future__ import annotations

import json
import shutil

import pytest
from families_helpers import HIDDEN, texts, tiny_config
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

WIDTH, OBJECTIVES = 16, 30


def _state(shapes, gaps):
    """``network.<i>`` Linear tensors at the indices reward-bench's heads use (gaps: activation/dropout slots)."""
    out, i = {}, 0
    for n, (o, k) in enumerate(shapes):
        out[f"network.{i}.weight"], out[f"network.{i}.bias"] = torch.randn(o, k) / 3, torch.randn(o)
        i += 1 + (gaps if n + 1 < len(shapes) else 0)
    return out


@pytest.fixture(scope="module")
def ldl(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    config = tiny_config(
        transformers.Gemma2Config,
        len(tok),
        head_dim=8,
        pad_token_id=tok.pad_token_id,
        num_objectives=OBJECTIVES,
        softmax=True,
    )
    torch.manual_seed(40)
    folder = tmp_path_factory.mktemp("ldl")
    transformers.Gemma2Model(config).save_pretrained(folder)
    # transformers 5 keeps `temperature` off a saved model config (a generation setting); LDL's config holds it
    saved = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**saved, "temperature": 2.0}))
    # MultiOutputNN: Linear, LeakyReLU, Linear, LeakyReLU, Linear; GatingNN: Linear, LeakyReLU, Dropout, ... Linear
    torch.save(_state([(WIDTH, HIDDEN), (WIDTH, WIDTH), (OBJECTIVES, WIDTH)], 1), folder / "regression_layer.pt")
    torch.save(_state([(WIDTH, HIDDEN), (WIDTH, WIDTH), (OBJECTIVES // 10, WIDTH)], 2), folder / "gating_layer.pt")
    tok.save_pretrained(folder)
    return folder


def by_hand(folder, ids):
    backbone = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        h = backbone(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].float()
    reg, gate = torch.load(folder / "regression_layer.pt"), torch.load(folder / "gating_layer.pt")
    leaky = torch.nn.functional.leaky_relu
    x = leaky(reg["network.0.weight"] @ h + reg["network.0.bias"])
    x = leaky(reg["network.2.weight"] @ x + reg["network.2.bias"])
    x = reg["network.4.weight"] @ x + reg["network.4.bias"]
    dists = torch.softmax(x.view(-1, 10), dim=-1)
    g = leaky(gate["network.0.weight"] @ h + gate["network.0.bias"])
    g = leaky(gate["network.3.weight"] @ g + gate["network.3.bias"])
    g = torch.softmax((gate["network.6.weight"] @ g + gate["network.6.bias"]) / 2.0, dim=0)
    return float(((g @ dists) * torch.linspace(0, 1, 10)).sum())


def test_ldl_reward_mixes_the_heads_distributions_at_the_last_token(ldl):
    rm = load_rm(f"hf:{ldl}", RMOptions(device="cpu", family="ldl-reward", attn_implementation="eager"))
    ids = rm.encode(texts())
    want = [by_hand(ldl, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert all(0.0 <= w <= 1.0 for w in want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # padded batch
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)


def test_a_missing_or_foreign_head_file_is_refused_in_one_line(ldl, tmp_path):
    folder = tmp_path / "no-gating"
    shutil.copytree(ldl, folder)
    (folder / "gating_layer.pt").unlink()
    with pytest.raises(RMBError, match=r"has no gating_layer\.pt \(the LDL gating head\); nothing was scored"):
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="ldl-reward"))._load()
    (folder / "gating_layer.pt").write_bytes(b"not a torch file")
    with pytest.raises(RMBError, match=r"cannot read gating_layer\.pt") as exc:
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="ldl-reward"))._load()
    assert "\n" not in str(exc.value)
    torch.save({"summary.weight": torch.zeros(1, HIDDEN)}, folder / "gating_layer.pt")
    with pytest.raises(RMBError, match=r"expected only network\.<i>\.weight/bias Linear layers"):
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="ldl-reward"))._load()
    torch.save(_state([(WIDTH, HIDDEN), (4, WIDTH)], 2), folder / "gating_layer.pt")
    with pytest.raises(RMBError, match=r"the gating head gives 4 weights for 3 objectives"):
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="ldl-reward"))._load()
