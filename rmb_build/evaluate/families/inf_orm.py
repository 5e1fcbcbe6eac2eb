"""``inf-orm``: infly/INF-ORM-Llama3.1-70B, a LlamaModel (``model.*``) plus a two-layer head ``score``:
Linear(hidden, hidden) (``score.0``), ReLU, Linear(hidden, 1) (``score.2``), read at each row's last real token."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family
from rmb_build.evaluate.families import _backbone_head as B

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions


def _score_head(config: PretrainedConfig) -> nn.Module:
    from torch import nn

    return nn.Sequential(nn.Linear(config.hidden_size, config.hidden_size), nn.ReLU(), nn.Linear(config.hidden_size, 1))


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    return B.load_head_model(
        ref,
        options,
        device,
        dtype,
        "an INF-ORM reward model",
        B.load_config(ref, options),
        "model",
        "score",
        _score_head,
    )


FAMILY = Family("inf-orm", "LlamaModel + score head Linear-ReLU-Linear at the last token (INF-ORM)", load, B.score)
FAMILIES.add(FAMILY.name, FAMILY)
