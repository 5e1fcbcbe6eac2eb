"""``inf-orm``: a tiny randomly initialised checkpoint with INF-ORM-Llama3.1-70B's parameter names (``model.*``
plus the ``score`` head: ``score.0`` Linear(hidden, hidden), ReLU, ``score.2`` Linear(hidden, 1)), written as
safetensors with SmolLM2's real tokenizer. Scores are checked against the head computed by hand (torch ops on
the saved tensors) on an unpadded forward of the backbone.
"""

from __future__ import annotations

import pytest
from families_helpers import HIDDEN, last_hidden, texts, tiny_config, without_tensors
from lazy_modules import importorskip_on_use

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")
safetensors_torch = importorskip_on_use("safetensors.torch")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml


@pytest.fixture(scope="module")
def inform(smol_tokenizer, tmp_path_factory):
    tok = smol_tokenizer
    config = tiny_config(transformers.LlamaConfig, len(tok), architectures=["INFORMForSequenceClassification"])
    torch.manual_seed(50)
    backbone = transformers.LlamaModel(config)
    tensors = {f"model.{k}": v.contiguous() for k, v in backbone.state_dict().items()}
    tensors.update(
        {
            "score.0.weight": torch.randn(HIDDEN, HIDDEN) / 4,
            "score.0.bias": torch.randn(HIDDEN),
            "score.2.weight": torch.randn(1, HIDDEN),
            "score.2.bias": torch.randn(1),
        }
    )
    folder = tmp_path_factory.mktemp("inf-orm")
    config.save_pretrained(folder)
    safetensors_torch.save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tok.save_pretrained(folder)
    return folder


def reference(folder, ids):
    """LlamaModel on one unpadded text, then score.2(relu(score.0(h))) at its last token, by hand."""
    h, saved = last_hidden(folder, "model", ids, transformers.LlamaModel)
    inner = torch.relu(saved["score.0.weight"] @ h + saved["score.0.bias"])
    return float(saved["score.2.weight"][0] @ inner + saved["score.2.bias"][0])


def test_inf_orm_score_head_at_the_last_token(inform):
    rm = load_rm(f"hf:{inform}", RMOptions(device="cpu", family="inf-orm"))
    ids = rm.encode(texts())
    assert len({len(x) for x in ids}) == len(ids)
    want = [reference(inform, x) for x in ids]
    assert len({round(w, 6) for w in want}) == len(want)
    assert rm.forward(ids) == pytest.approx(want, abs=1e-4)  # padded batch
    assert [rm.forward([x])[0] for x in ids] == pytest.approx(want, abs=1e-4)


def test_inf_orm_without_its_head_is_refused(inform, tmp_path):
    folder = without_tensors(inform, tmp_path / "no-head", "score.2.weight", "score.2.bias")
    with pytest.raises(
        RMBError,
        match=r"2 parameter\(s\) are not in its checkpoint and would be randomly "
        r"initialised: score\.2\.bias, score\.2\.weight",
    ) as exc:
        load_rm(f"hf:{folder}", RMOptions(device="cpu", family="inf-orm"))._load()
    assert "\n" not in str(exc.value)


def test_the_default_family_refuses_an_inf_orm_checkpoint(inform):
    """Read as a plain sequence classifier, its ``score`` head does not fit (``score.weight`` is missing)."""
    with pytest.raises(RMBError, match=r"score\.weight"):
        load_rm(f"hf:{inform}", RMOptions(device="cpu"))._load()
