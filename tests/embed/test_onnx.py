"""The ONNX Runtime backend of the sentence encoder: same vectors as sentence-transformers' torch run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'rmb_build[onnx]')")

from rmb_build.core.errors import RMBError  # noqa: E402
from rmb_build.embed.encoder import embed, model_fingerprint, model_path  # noqa: E402
from rmb_build.embed.onnx import OnnxEncoder  # noqa: E402

TEXTS = [
    "How do I reverse a linked list in Python?",
    "Write a short poem about the sea at night.",
    "hi",
    "Explain, step by step and with an example, how compound interest works over several years "
    "when the rate changes every year and deposits are made monthly. " * 3,
]


@pytest.fixture(scope="module")
def torch_vectors():
    return embed(TEXTS)


@pytest.mark.parametrize("backend,floor", [("onnx", 0.9999), ("onnx-int8", 0.97)])
@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_onnx_vectors_agree_with_the_torch_ones(backend, floor, torch_vectors):
    got = embed(TEXTS, backend=backend)
    assert got.shape == torch_vectors.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * torch_vectors).sum(axis=1)
    assert cosines.min() >= floor, cosines
    # each text is still nearest to itself among the torch vectors
    assert (np.argmax(got @ torch_vectors.T, axis=1) == np.arange(len(TEXTS))).all()


def test_the_backend_is_part_of_the_fingerprint():
    assert model_fingerprint(backend="onnx") != model_fingerprint()
    assert model_fingerprint(backend="onnx-int8") != model_fingerprint(backend="onnx")


@pytest.mark.torch
def test_a_model_that_is_not_mean_pooled_is_refused(tmp_path):
    folder = tmp_path / "cls-model"
    shutil.copytree(model_path(), folder)
    cfg = json.loads((folder / "1_Pooling" / "config.json").read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(RMBError, match="mean Pooling"):
        OnnxEncoder(folder, "cls-model@test")
