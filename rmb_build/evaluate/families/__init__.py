"""Reward-model families: how a checkpoint of one architecture is loaded and where its reward is read.

``hf:<model>`` tokenizes each text with the model's chat template and hands batches of token ids to
its family. A family is one module of this package that registers its ``Family`` in ``FAMILIES`` under
its name; adding one is adding a file.
Every family loads through ``loading.load_checked`` (or checks its own head the same way), so a
parameter the checkpoint lacks stops the run instead of being scored at random.

A family gives (typed as ``LoadModel``, ``ScoreBatch`` and ``FinishIds``):
- ``load(ref, options, device, dtype)``: the model, in eval mode on ``device``;
- ``score(model, input_ids, attention_mask)``: one float reward per row (a 1-D tensor), right-padded
  batches as ``loading.pad`` makes them; in fp32 a row's reward is the same at any batch size (a head read at
  one token per text runs through ``rowwise``; ``tests/evaluate/test_batch_invariance.py``);
- ``finish_ids(model, tokenizer, ids)`` (optional): a text's token ids as the family reads them (e.g.
  a reward token appended), before batching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from rmb_build.core.registry import Registry

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from rmb_build.evaluate.loading import ModelRef
    from rmb_build.evaluate.rm_options import RMOptions

DEFAULT = "sequence-classifier"


class LoadModel(Protocol):
    """A family's ``load``: the checkpoint at ``ref`` as the family's model, in eval mode on ``device``."""

    def __call__(self, ref: ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel: ...


class ScoreBatch(Protocol):
    """A family's ``score``: one float reward per row of a right-padded batch (a 1-D tensor)."""

    def __call__(
        self, model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor: ...


class FinishIds(Protocol):
    """A family's ``finish_ids``: a text's token ids as the family reads them (e.g. a reward token appended)."""

    def __call__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[int]: ...


@dataclass(frozen=True)
class Family:
    name: str
    summary: str  # one line for `rmb models` and the docs
    load: LoadModel
    score: ScoreBatch
    finish_ids: FinishIds | None = None
    # the real checkpoints ship their own modelling code (without it transformers' own class for the model_type may
    # load, without the head): ``hf:`` refuses to load one without --trust-remote-code
    needs_remote_code: bool = False
    alone: bool = False  # ``score`` runs each text alone (no padding), whatever the batch


FAMILIES: Registry[Family] = Registry("reward-model family", __name__)


def families() -> dict[str, Family]:
    """Every family of this package, by name."""
    return dict(sorted(FAMILIES.items()))


def family(name: str) -> Family:
    return FAMILIES.get(name, field="--family")


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """The index of each row's last real token in a right-padded batch (a masked leading BOS, as a harness
    protocol may mask one, does not move it)."""
    import torch

    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (positions * attention_mask).argmax(dim=1)


def gather_last(values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``values`` (batch, length[, ...]) at each row's last real token."""
    import torch

    rows = torch.arange(values.shape[0], device=values.device)
    return values[rows, last_token_index(attention_mask)]


def rowwise(head: Callable[[torch.Tensor], torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """``head`` on each row of ``rows`` (batch, hidden) alone, concatenated: a head read at one token per text.

    A matrix product's kernel is chosen by its shape: on one output column (a reward head) or on one to three
    rows, a row's result depends on how many rows share the call, so a head on the batch's gathered rows would
    make a text's score depend on its batch. One row at a time it is the same at any batch size; a head is a
    few small layers, so the loop costs nothing beside the backbone."""
    import torch

    return torch.cat([head(rows[i : i + 1]) for i in range(rows.shape[0])])


__all__ = [
    "DEFAULT",
    "FAMILIES",
    "Family",
    "FinishIds",
    "LoadModel",
    "ScoreBatch",
    "families",
    "family",
    "gather_last",
    "last_token_index",
    "rowwise",
]
