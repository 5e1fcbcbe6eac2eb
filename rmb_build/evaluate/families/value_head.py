"""``value-head``: a transformers backbone plus a value head, the reward read at each row's last real token.
The variant is chosen by the checkpoint's parameter names; the backbone sits under ``model.`` or
``transformer.`` (whichever holds ``embed_tokens.weight``):

- ``starling`` (Nexusflow/Starling-RM-34B; Starling-RM-7B-alpha's ``transformer.*`` keys): ``v_head.weight``,
  Linear(hidden, 1, bias=False);
- ``regression-head`` (openbmb/UltraRM-13b, openbmb/Eurus-RM-7b): ``regression_head.weight``,
  Linear(hidden, 1, bias=False);
- ``grm`` (Ray2333/GRM-*-sftreg): ``v_head.summary.*``, the head its config's ``vhead_layer_type`` /
  ``vhead_num_layers`` / ``vhead_num_neurons`` describe: ``vhead_num_layers`` x (Linear, ReLU) then
  Linear(neurons, 1) (default: one hidden layer of 1024), or one Linear(hidden, 1) for ``linear``.

The head is built here, so a checkpoint's shipped modelling code (Eurus, GRM) is not run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family
from rmb_build.evaluate.families import _backbone_head as B

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions


def _linear(config: PretrainedConfig) -> nn.Module:
    from torch import nn

    return nn.Linear(config.hidden_size, 1, bias=False)


def _grm_head(config: PretrainedConfig) -> nn.Module:
    from torch import nn

    class GRMValueHead(nn.Module):  # dropout before `summary` in training; nothing at evaluation
        def __init__(self):
            super().__init__()
            if getattr(config, "vhead_layer_type", "mlp") == "linear":
                self.summary = nn.Linear(config.hidden_size, 1)
                return
            width, neurons, layers = config.hidden_size, getattr(config, "vhead_num_neurons", 1024), []
            for _ in range(getattr(config, "vhead_num_layers", 1)):
                layers += [nn.Linear(width, neurons), nn.ReLU()]
                width = neurons
            self.summary = nn.Sequential(*layers, nn.Linear(width, 1))

        def forward(self, hidden):
            return self.summary(hidden)

    return GRMValueHead()


# variant: (head attribute, how its keys are recognised, head builder)
VARIANTS = {
    "grm": ("v_head", lambda keys: any(k.startswith("v_head.summary.") for k in keys), _grm_head),
    "regression-head": ("regression_head", lambda keys: "regression_head.weight" in keys, _linear),
    "starling": ("v_head", lambda keys: "v_head.weight" in keys, _linear),
}
BACKBONES = ("model", "transformer")


def variant(keys: set[str]) -> tuple[str, str] | None:
    """(variant name, backbone attribute) of a checkpoint's parameter names, or None."""
    backbone = next((b for b in BACKBONES if f"{b}.embed_tokens.weight" in keys), None)
    name = next((n for n, (_, match, _) in VARIANTS.items() if match(keys)), None)
    return (name, backbone) if name and backbone else None


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    found = variant(B.checkpoint_keys(ref, options))
    if found is None:
        raise RMBError(
            f"model {ref.name!r}: its checkpoint has no value head this family knows (v_head.weight, "
            "regression_head.weight or v_head.summary.*, over a backbone under model. or transformer.); "
            "nothing was scored"
        )
    name, backbone = found
    head_attr, _, make_head = VARIANTS[name]
    model = B.load_head_model(
        ref,
        options,
        device,
        dtype,
        f"a value-head reward model ({name})",
        B.load_config(ref, options),
        backbone,
        head_attr,
        make_head,
    )
    model.rmb_variant = name  # type: ignore[assignment]  # a plain attribute: nn.Module keeps it in __dict__
    return model


FAMILY = Family(
    "value-head", "backbone + value head at the last token (Starling, UltraRM/Eurus, GRM sftreg)", load, B.score
)
FAMILIES.add(FAMILY.name, FAMILY)
