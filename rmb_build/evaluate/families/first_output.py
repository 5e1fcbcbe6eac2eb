"""``first-output``: a model with its own code (``AutoModel``, --trust-remote-code) whose forward reads the reward
itself and returns it first, one value per text: Qwen/WorldPM-72B, whose card scores each conversation alone
(``model(input_ids=...)[0]``, no padding, no attention mask) and reads it at the final ``<|endoftext|>``. Each text
is run alone here too, so the model's own way of finding the end is never given padding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModel

    model = T.load_checked(AutoModel, ref, options, "a reward model with its own code", dtype=dtype)
    return T.place(model, options, device)


def first_value(output: object) -> torch.Tensor:
    """The output's first element (a tuple's, a ModelOutput's or a mapping's first value), as one float."""
    if isinstance(output, Mapping):
        output = next(iter(output.values()), None)
    elif isinstance(output, (tuple, list)) or hasattr(output, "to_tuple"):
        items = cast("Sequence[object]", output)
        output = items[0] if len(items) else None
    if output is None or not hasattr(output, "numel") or output.numel() != 1:
        shape = None if output is None else tuple(getattr(output, "shape", ()))
        raise RMBError(f"first-output: the model's first output is {shape}, not one reward for the text")
    return cast("torch.Tensor", output).float().reshape(1)


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    import torch

    rows = []
    for ids, mask in zip(input_ids, attention_mask):
        alone = ids[mask.bool()].unsqueeze(0)
        rows.append(first_value(model(input_ids=alone)))
    return torch.cat(rows)


FAMILY = Family(
    "first-output",
    "own-code AutoModel returning the reward first, each text run alone (WorldPM)",
    load,
    score,
    needs_remote_code=True,
    alone=True,
)
FAMILIES.add(FAMILY.name, FAMILY)
