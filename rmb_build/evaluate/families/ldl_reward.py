"""``ldl-reward``: ShikaiChen/LDL-Reward-Gemma-2-27B-v0.1 (label distribution learning), laid out as reward-bench's
``LDLRewardModel27B`` reads it: a Gemma-2 backbone in the checkpoint's weights, and two heads in their own files,
``regression_layer.pt`` and ``gating_layer.pt`` (state dicts of ``network.<i>`` Linear layers, LeakyReLU after
each hidden one; the gating's dropout does nothing at evaluation). At each row's last real token, in fp32:
the regression head gives ``num_objectives`` values, a softmax over each group of 10 makes one distribution per
objective; the gating head's ``num_objectives / 10`` weights (a softmax at ``temperature`` when the config says
``softmax``; both read from config.json) mix them into one distribution over 10 bins, and the reward is its mean over bins 0, 1/9, ..., 1.
Both heads are built here from their files (the widths from the tensors), so no remote code runs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family, gather_last, rowwise
from rmb_build.evaluate.families import _backbone_head as B

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions

BINS = 10
HEADS = {"regression": "regression_layer.pt", "gating": "gating_layer.pt"}


def head_from_state(state: dict[str, torch.Tensor], where: str) -> nn.Module:
    """``network`` = Linear layers at the state's indices, LeakyReLU after each but the last (other slots: identity)."""
    from torch import nn

    indices = sorted({int(k.split(".")[1]) for k in state if k.startswith("network.") and k.endswith(".weight")})
    if not indices or set(state) != {f"network.{i}.{p}" for i in indices for p in ("weight", "bias")}:
        raise RMBError(
            f"{where}: expected only network.<i>.weight/bias Linear layers, found {', '.join(sorted(state)[:6])}"
        )
    slots: list[nn.Module] = [nn.Identity() for _ in range(indices[-1] + 1)]
    for n, i in enumerate(indices):
        out_f, in_f = state[f"network.{i}.weight"].shape
        slots[i] = nn.Linear(in_f, out_f)
        if n + 1 < len(indices):
            slots[i + 1] = nn.LeakyReLU()
    head = nn.Module()
    head.network = nn.Sequential(*slots)
    head.network.load_state_dict({k[len("network.") :]: v for k, v in state.items()})
    return head.float().eval()


def linears(head: nn.Module) -> list[nn.Linear]:
    from torch import nn

    return [m for m in head.get_submodule("network").children() if isinstance(m, nn.Linear)]


def _load_head(ref: T.ModelRef, options: RMOptions, name: str) -> nn.Module:
    import torch

    path = B.checkpoint_file(ref, options, HEADS[name])
    if path is None:
        raise RMBError(f"model {ref.name!r}: has no {HEADS[name]} (the LDL {name} head); nothing was scored")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file
        raise RMBError(
            f"model {ref.name!r}: cannot read {HEADS[name]}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if not isinstance(state, dict):
        raise RMBError(f"model {ref.name!r}: {HEADS[name]} holds no state dict")
    return head_from_state(state, f"model {ref.name!r}: {HEADS[name]}")


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModel

    model = T.load_checked(AutoModel, ref, options, "an LDL-Reward backbone", dtype=dtype)
    regression, gating = _load_head(ref, options, "regression"), _load_head(ref, options, "gating")
    hidden, reg, gate = model.config.hidden_size, linears(regression), linears(gating)
    objectives = reg[-1].out_features
    if reg[0].in_features != hidden or gate[0].in_features != hidden or objectives % BINS:
        raise RMBError(
            f"model {ref.name!r}: its LDL heads do not fit a hidden size of {hidden} and groups of {BINS} bins"
        )
    if gate[-1].out_features != objectives // BINS:
        raise RMBError(
            f"model {ref.name!r}: the gating head gives {gate[-1].out_features} weights for "
            f"{objectives // BINS} objectives"
        )
    model = T.place(model, options, device)
    model.ldl_regression, model.ldl_gating = regression.to(model.device), gating.to(model.device)
    # Read from config.json itself: transformers moves `temperature` off a model config (a generation setting).
    config_path = B.checkpoint_file(ref, options, "config.json")
    if config_path is None:
        raise RMBError(f"model {ref.name!r}: has no config.json")
    with open(config_path, encoding="utf-8") as fh:
        raw = json.load(fh)
    # plain values: nn.Module keeps them in __dict__ (its __setattr__ is typed for tensors and modules)
    model.ldl_softmax, model.ldl_temperature = bool(raw.get("softmax", False)), float(raw.get("temperature", 1.0))  # type: ignore[assignment]
    return model


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    import torch

    hidden = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)[0]
    h = gather_last(hidden, attention_mask).float().to(model.get_parameter("ldl_regression.network.0.weight").device)
    regression, gating = model.get_submodule("ldl_regression.network"), model.get_submodule("ldl_gating.network")
    rewards = torch.softmax(rowwise(regression, h).view(h.shape[0], -1, BINS), dim=-1)
    weights = rowwise(gating, h)
    if model.ldl_softmax:
        # ldl_softmax and ldl_temperature: plain values ``load`` set on the model
        weights = torch.softmax(weights / model.ldl_temperature, dim=1)  # type: ignore[operator]
    dist = (weights.unsqueeze(-1) * rewards).sum(1)  # the weighted mix, row by row (no batched kernel)
    return (dist * torch.linspace(0, 1, BINS, device=dist.device)).sum(-1)


FAMILY = Family(
    "ldl-reward",
    "Gemma-2 + LDL regression and gating heads, the mean of the mixed distribution (LDL-Reward)",
    load,
    score,
)
FAMILIES.add(FAMILY.name, FAMILY)
