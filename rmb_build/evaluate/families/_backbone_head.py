"""Reward models that are a transformers backbone plus a small head read at each row's last real token,
where the checkpoint ships no loadable class of its own (``value-head``, ``inf-orm``).

The model is built here from the published layout: the backbone class transformers has for the
config's ``model_type`` under the checkpoint's attribute name (``model``, ``transformer``), and the head
under its own; it loads through ``load_checked``, so a head weight the checkpoint lacks is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import gather_last, rowwise

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions

INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def checkpoint_file(ref: T.ModelRef, options: RMOptions, name: str) -> str | None:
    """The path of one file of the checkpoint (downloaded when the model is read from the Hub), or None."""
    from pathlib import Path

    if not ref.online:
        path = Path(ref.path) / name
        return str(path) if path.is_file() else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import EntryNotFoundError

    try:
        return hf_hub_download(ref.path, name, revision=options.revision)
    except EntryNotFoundError:
        return None


def checkpoint_keys(ref: T.ModelRef, options: RMOptions) -> set[str]:
    """The parameter names the checkpoint holds, read from its index or file headers (no weights loaded)."""
    for name in INDEXES:
        path = checkpoint_file(ref, options, name)
        if path:
            with open(path, encoding="utf-8") as fh:
                return set(json.load(fh)["weight_map"])
    path = checkpoint_file(ref, options, "model.safetensors")
    if path:
        from safetensors import safe_open

        with safe_open(path, framework="pt") as fh:
            return set(fh.keys())
    path = checkpoint_file(ref, options, "pytorch_model.bin")
    if path:
        import torch

        try:
            return set(torch.load(path, map_location="cpu", weights_only=True, mmap=True))
        except RuntimeError:  # a legacy (pre-zip) file cannot be memory-mapped: read it whole
            return set(torch.load(path, map_location="cpu", weights_only=True))
    raise RMBError(f"model {ref.name!r}: no weights found (model.safetensors, pytorch_model.bin or their index)")


def load_config(ref: T.ModelRef, options: RMOptions) -> PretrainedConfig:
    """The config as transformers' own class for its ``model_type`` (a shipped config class is not run)."""
    from transformers import CONFIG_MAPPING

    path = checkpoint_file(ref, options, "config.json")
    if path is None:
        raise RMBError(f"model {ref.name!r}: has no config.json")
    with open(path, encoding="utf-8") as fh:
        model_type = json.load(fh).get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise RMBError(
            f"model {ref.name!r}: model_type {model_type!r} is not an architecture transformers knows; "
            "this family builds its head on a transformers backbone"
        )
    return CONFIG_MAPPING[model_type].from_pretrained(path)


def head_model_class(
    config: PretrainedConfig, backbone_attr: str, head_attr: str, make_head: Callable[[PretrainedConfig], nn.Module]
) -> type[PreTrainedModel]:
    """A ``PreTrainedModel`` class: the config's backbone as ``backbone_attr``, ``make_head(config)`` as
    ``head_attr``; its forward returns the head's output at each row's last real token, one value per row."""
    from transformers import PreTrainedModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    backbone = cast("type[PreTrainedModel]", MODEL_MAPPING[type(config)])
    # The backbone's own PreTrainedModel base gives weight init, _no_split_modules and attention support.
    base = next(c for c in backbone.__mro__[1:] if issubclass(c, PreTrainedModel))

    class HeadRewardModel(base):  # type: ignore[valid-type, misc]  # a base found at run time
        base_model_prefix = backbone_attr

        def __init__(self, config):
            super().__init__(config)
            setattr(self, backbone_attr, backbone(config))
            setattr(self, head_attr, make_head(config))
            self.post_init()

        def forward(self, input_ids=None, attention_mask=None):
            hidden = getattr(self, backbone_attr)(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)[
                0
            ]
            return rowwise(getattr(self, head_attr), gather_last(hidden, attention_mask)).squeeze(-1)

    name = f"{backbone.__name__}With{head_attr.title().replace('_', '')}"  # e.g. LlamaModelWithVHead
    HeadRewardModel.__name__ = HeadRewardModel.__qualname__ = name
    return HeadRewardModel


def load_head_model(
    ref: T.ModelRef,
    options: RMOptions,
    device: str,
    dtype: torch.dtype,
    what: str,
    config: PretrainedConfig,
    backbone_attr: str,
    head_attr: str,
    make_head: Callable[[PretrainedConfig], nn.Module],
) -> PreTrainedModel:
    cls = head_model_class(config, backbone_attr, head_attr, make_head)
    model = T.load_checked(cls, ref, options, what, config=config, dtype=dtype)
    return T.place(model, options, device)


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    return model(input_ids=input_ids, attention_mask=attention_mask).float()
