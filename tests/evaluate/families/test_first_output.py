"""``first-output``: a tiny randomly initialised look-alike of WorldPM-72B's own code (a Qwen2 backbone whose
forward reads a head at the text's last token and returns it first), with SmolLM2's real tokenizer. The
look-alike's modelling file stands in for the real remote code, which cannot be fetched here; like WorldPM's card,
it is given no attention mask, so each text must reach it alone. Scores are checked against the head by hand."""

from __future__ import annotations

import importlib.util

import pytest
from families_helpers import last_hidden, save_lookalike, texts, tiny_config
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.families import first_output

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

MODELING = """
import torch
from torch import nn
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel


class WorldPMLookalike(Qwen2PreTrainedModel):
    config_class = Qwen2Config

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.score = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids)[0]
        return (self.score(hidden[:, -1]).squeeze(-1),)  # the last position: padding would be read as the end
"""


@pytest.fixture(scope="module")
def worldpm(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    folder = tmp_path_factory.mktemp("worldpm")
    (folder / "modeling_worldpm.py").write_text(MODELING)
    spec = importlib.util.spec_from_file_location("worldpm_lookalike", folder / "modeling_worldpm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = tiny_config(
        transformers.Qwen2Config,
        len(tok),
        architectures=["WorldPMLookalike"],
        auto_map={"AutoModel": "modeling_worldpm.WorldPMLookalike"},
    )
    torch.manual_seed(60)
    return save_lookalike(folder, module.WorldPMLookalike(config), tok)


def by_hand(folder, ids):
    h, saved = last_hidden(folder, "model", ids, transformers.Qwen2Model)
    return float(saved["score.weight"][0] @ h + saved["score.bias"][0])


def test_first_output_runs_each_text_alone(worldpm):
    rm = load_rm(f"hf:{worldpm}", RMOptions(device="cpu", family="first-output", trust_remote_code=True))
    ids = rm.encode(texts())
    assert type(rm._load()).__name__ == "WorldPMLookalike"
    want = [by_hand(worldpm, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # one padded batch, each row run alone
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)


def test_without_trust_remote_code_it_is_refused(worldpm):
    with pytest.raises(RMBError, match=r"add --trust-remote-code"):
        load_rm(f"hf:{worldpm}", RMOptions(device="cpu", family="first-output"))._load()


def test_an_output_that_is_not_one_value_is_refused():
    t = torch.tensor
    assert first_output.first_value((t([[0.5]]),)).tolist() == [0.5]
    assert first_output.first_value({"score": t(2.0)}).tolist() == [2.0]
    with pytest.raises(RMBError, match=r"first output is \(1, 3\), not one reward"):
        first_output.first_value((t([[1.0, 2.0, 3.0]]),))
    with pytest.raises(RMBError, match=r"first output is None"):
        first_output.first_value(())
