"""``output-field``: RLHFlow/ArmoRM-Llama3-8B-v0.1, nicolinho/QRM-Llama3.1-8B and other models with their own
code (``AutoModelForSequenceClassification``, --trust-remote-code) whose forward returns an object carrying
the reward in a field: the first of ``score``, ``rewards``, ``logits`` present, one value per row. ArmoRM and
QRM put their preference score (the gated sum of the objectives) in ``score``, ahead of the per-objective
``rewards``; a field holding several values per row is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family, last_token_index

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions

FIELDS = ("score", "rewards", "logits")


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModelForSequenceClassification

    model = T.load_checked(
        AutoModelForSequenceClassification, ref, options, "a reward model with its own code", dtype=dtype
    )
    return T.place(model, options, device)


def free_pad_id(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """A token id no row's real tokens use: the config's pad id when it is free, else the smallest free id."""
    import torch

    try:
        vocab = cast("nn.Embedding", model.get_input_embeddings()).num_embeddings
    except (AttributeError, NotImplementedError):
        vocab = int(model.config.vocab_size)
    free = torch.ones(vocab, dtype=torch.bool, device=input_ids.device)
    free[input_ids[attention_mask.bool()]] = False
    pad = model.config.pad_token_id
    if isinstance(pad, int) and 0 <= pad < vocab and free[pad]:
        return pad
    if not free.any():
        raise RMBError(
            "output-field: every token id occurs in the batch; no id is left to pad with (use --batch-size 1)"
        )
    return int(free.nonzero()[0])


def reward_field(output: object, rows: int) -> torch.Tensor:
    """The first of FIELDS present in ``output``, as one float per row."""
    for name in FIELDS:
        value = output.get(name) if isinstance(output, Mapping) else getattr(output, name, None)
        if value is None:
            continue
        value = value.float().reshape(rows, -1)
        if value.shape[1] != 1:
            raise RMBError(
                f"output-field: the model's output field {name!r} holds {value.shape[1]} values per "
                "text; a reward is one"
            )
        return value[:, 0]
    raise RMBError(
        f"output-field: the model's output ({type(output).__name__}) has none of the fields {', '.join(FIELDS)}"
    )


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    import torch

    if input_ids.shape[0] > 1 and next(model.parameters()).dtype == torch.float32:
        # The model's own head runs on the batch's rows together, and its kernels round with their number: in
        # fp32, where nothing else moves a score with the batch, each text runs alone (its own width, no padding).
        ends = (last_token_index(attention_mask) + 1).tolist()
        return torch.cat(
            [_score(model, ids[None, :n], m[None, :n]) for ids, m, n in zip(input_ids, attention_mask, ends)]
        )
    return _score(model, input_ids, attention_mask)


def _score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    # ArmoRM's and QRM's forwards find each row's end as the token before the first config.pad_token_id. The
    # tokenizer's pad is often a token every text holds (eos, <|im_end|>), which would read the reward mid-text,
    # so pads become an id the batch does not use, for this call.
    pad = free_pad_id(model, input_ids, attention_mask)
    ids = input_ids.masked_fill(attention_mask == 0, pad)
    saved, model.config.pad_token_id = model.config.pad_token_id, pad
    try:
        output = model(input_ids=ids, attention_mask=attention_mask)
    finally:
        model.config.pad_token_id = saved
    return reward_field(output, input_ids.shape[0])


FAMILY = Family(
    "output-field",
    "own-code RM, reward in output.score / .rewards / .logits (ArmoRM, QRM)",
    load,
    score,
    needs_remote_code=True,
)
FAMILIES.add(FAMILY.name, FAMILY)
