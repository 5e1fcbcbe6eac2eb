"""``nemotron-hf``: nvidia/Llama-3.1-Nemotron-70B-Reward-HF, a causal LM whose reward is the logit of vocabulary
id 0 at the first generation step. Its card renders conversation + answer through the chat template (no
generation prompt), generates one token and reads that step's score for id 0: here, the LM head's id-0
output at each row's last real token (raw, with no sampling temperature applied)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family, gather_last, rowwise

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from rmb_build.evaluate.rm_options import RMOptions

REWARD_ID = 0


def load(ref: T.ModelRef, options: RMOptions, device: str, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModelForCausalLM

    model = T.load_checked(AutoModelForCausalLM, ref, options, "a causal LM (Nemotron reward)", dtype=dtype)
    return T.place(model, options, device)


def score(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    # The LM head on the last real positions only: full logits would be batch x length x 128k values.
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)[0]
    return rowwise(model.get_output_embeddings(), gather_last(hidden, attention_mask))[:, REWARD_ID].float()


FAMILY = Family(
    "nemotron-hf", "causal LM, the logit of token id 0 after the answer (Nemotron-70B-Reward-HF)", load, score
)
FAMILIES.add(FAMILY.name, FAMILY)
