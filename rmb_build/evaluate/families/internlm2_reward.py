"""``internlm2-reward``: internlm/internlm2-{1_8b,7b,20b}-reward (their own code: ``AutoModel`` with
--trust-remote-code). Each text ends with the reward token (``config.reward_token_id``, 92527 on the real
ones), appended unless already there; the reward is ``v_head`` (Linear(hidden, 1, bias=False)) on the
backbone's (``model``) last hidden state at that token, as the model's own forward computes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family, gather_last, rowwise

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from rmb_build.evaluate.rm_options import RMOptions


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModel

    model = T.load_checked(AutoModel, ref, options, "an InternLM2 reward model", dtype=dtype)
    if getattr(model.config, "reward_token_id", None) is None or not hasattr(model, "v_head"):
        raise RMBError(
            f"model {ref.name!r}: loaded as {type(model).__name__}, which has no reward token "
            "(config.reward_token_id) or value head (v_head): not an InternLM2 reward model"
        )
    return T.place(model, options, device)


def finish_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[int]:
    token = model.config.reward_token_id
    return list(ids) if ids and ids[-1] == token else [*ids, token]


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    # The backbone and head directly: the same numbers as the model's forward, without its output conventions.
    hidden = model.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)[0]
    return rowwise(model.get_submodule("v_head"), gather_last(hidden, attention_mask)).squeeze(-1).float()


FAMILY = Family(
    "internlm2-reward",
    "InternLM2 reward: v_head at the appended reward token (remote code)",
    load,
    score,
    finish_ids=finish_ids,
    needs_remote_code=True,
)
FAMILIES.add(FAMILY.name, FAMILY)
