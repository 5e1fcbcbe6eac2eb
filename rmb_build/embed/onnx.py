"""A sentence-transformers model run by ONNX Runtime on the CPU (optionally int8-quantised).

sentence-transformers' own ONNX backend goes through ``optimum``, whose ONNX exporter pins
transformers below 4.58 while sentence-transformers 6 needs transformers 5; so the model's
transformer is exported here with ``torch.onnx`` and run with ``onnxruntime``, and the rest of the
pipeline (mean pooling, L2 normalisation) is applied as the model's own module files declare. Only
that pipeline shape (Transformer -> mean Pooling -> Normalize, the all-MiniLM family) is accepted.

The exported graph is kept in the user cache (``$XDG_CACHE_HOME/rmb/onnx/...``), one per model
fingerprint and variant, so the export (~10 s) happens once per machine.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from rmb_build.core.errors import RMBError
from rmb_build.core.paths import user_cache_dir

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _check_pipeline(model_dir: Path) -> int:
    """The model's max_seq_length, after checking its modules are Transformer -> mean Pooling -> Normalize."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((model_dir / "modules.json").read_text())]
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        max_len = int(json.loads((model_dir / "sentence_bert_config.json").read_text()).get("max_seq_length", 512))
    except (OSError, ValueError, KeyError) as exc:
        raise RMBError(
            f"{model_dir}: not a sentence-transformers model folder the ONNX backend can run ({exc})"
        ) from None
    mean_only = pooling.get("pooling_mode_mean_tokens") and not any(
        pooling.get(k)
        for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    )
    if modules != ["Transformer", "Pooling", "Normalize"] or not mean_only:
        raise RMBError(
            f"{model_dir}: the ONNX backend runs Transformer -> mean Pooling -> Normalize models only "
            f"(this one is {' -> '.join(modules)}); use the torch backend"
        )
    return max_len


def _export(model_dir: Path, target: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = tok(["a sample sentence", "another, longer sample sentence"], padding=True, return_tensors="pt")
    tmp = target.with_suffix(".tmp.onnx")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    with torch.no_grad():
        torch.onnx.export(
            LastHidden(model),
            tuple(sample[k] for k in _INPUTS),
            str(tmp),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    os.replace(tmp, target)


def _quantize(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_suffix(".tmp.onnx")
    # per-channel weights: per-tensor int8 moved short texts to cosine 0.93 of the float vectors
    quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    os.replace(tmp, target)


_export_lock = threading.Lock()


def onnx_model_file(model_dir: str | os.PathLike, fingerprint: str, int8: bool) -> Path:
    """The exported (and, with ``int8``, quantised) graph for a model, exported on first use."""
    import hashlib

    folder = user_cache_dir() / "onnx" / hashlib.sha256(fingerprint.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model.onnx"
    with _export_lock:
        if not fp32.is_file():
            _export(Path(model_dir), fp32)
        if not int8:
            return fp32
        q8 = folder / "model.int8.onnx"
        if not q8.is_file():
            _quantize(fp32, q8)
        return q8


class OnnxEncoder:
    """Unit-length sentence embeddings from an exported graph, in length-sorted batches."""

    def __init__(self, model_dir: str | os.PathLike, fingerprint: str, int8: bool = False, threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise RMBError("the onnx embedding backend needs onnxruntime: pip install 'rmb_build[onnx]'") from None
        from transformers import AutoTokenizer

        model_dir = Path(model_dir)
        self.max_length = _check_pipeline(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or os.cpu_count() or 1
        opts.inter_op_num_threads = 1
        # No spinning between ops (as torch's OMP_WAIT_POLICY=PASSIVE in embeddings.load_encoder): on a
        # shared CPU spinning threads starve the other processes of the build.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        path = onnx_model_file(model_dir, fingerprint, int8)
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}

    def dimension(self) -> int:
        return int(self.session.get_outputs()[0].shape[-1])

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension()), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
            )
            feed = {k: enc[k].astype(np.int64) for k in _INPUTS if k in self.input_names}
            if "token_type_ids" in self.input_names and "token_type_ids" not in enc:
                feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
            hidden = self.session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            out[idx] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out
