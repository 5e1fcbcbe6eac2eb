"""``sequence-classifier``: ``AutoModelForSequenceClassification`` with one label (the score) or two (the
second label's log-odds): Skywork-Reward, tulu-2.5 RMs, most of RewardBench's classifiers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family, rowwise

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModelForSequenceClassification

    model = T.load_checked(AutoModelForSequenceClassification, ref, options, "a sequence classifier", dtype=dtype)
    if model.config.num_labels not in (1, 2):
        raise RMBError(
            f"model {ref.name!r}: has {model.config.num_labels} labels; a reward model has 1 "
            "(a score) or 2 (the second label's log-odds is used)"
        )
    return T.place(model, options, device)


def _linear_head(model: PreTrainedModel) -> nn.Linear | None:
    """The ``score`` Linear of transformers' own decoder classifiers (Llama, Qwen, Gemma, GPT-2, ...), which they
    apply at every position and read at the last token that is not the pad id; None for any other layout (an
    encoder's pooler and classifier, a model's own code), which runs its own forward."""
    from torch import nn

    head = getattr(model, "score", None)
    own = type(model).__module__.startswith("transformers.models.")
    return head if own and isinstance(head, nn.Linear) and model.base_model is not model else None


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    import torch

    head = _linear_head(model)
    if head is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits.float()
    else:  # the same read as the model's forward, the head on each text's row alone (``rowwise``)
        hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)[0]
        pad = model.config.pad_token_id
        if pad is None:
            last = torch.full((input_ids.shape[0],), input_ids.shape[1] - 1, device=hidden.device)
        else:  # transformers' rule: the rightmost token that is not the pad id
            kept = (input_ids != pad).to(hidden.device, torch.int32)
            last = (torch.arange(input_ids.shape[1], device=hidden.device, dtype=torch.int32) * kept).argmax(-1)
        rows = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        logits = rowwise(head, rows).float()
    return logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0]


FAMILY = Family("sequence-classifier", "AutoModelForSequenceClassification, 1 label (or 2: log-odds)", load, score)
FAMILIES.add(FAMILY.name, FAMILY)
