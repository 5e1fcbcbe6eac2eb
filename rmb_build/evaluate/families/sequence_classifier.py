"""``sequence-classifier``: ``AutoModelForSequenceClassification`` with one label (the score) or two (the
second label's log-odds): Skywork-Reward, tulu-2.5 RMs, most of RewardBench's classifiers."""

from __future__ import annotations

from typing import Any

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.families import FAMILIES, Family


def load(ref: T.ModelRef, options: Any, device: str, dtype: Any) -> Any:
    from transformers import AutoModelForSequenceClassification

    model = T.load_checked(AutoModelForSequenceClassification, ref, options, "a sequence classifier", dtype=dtype)
    if model.config.num_labels not in (1, 2):
        raise RMBError(
            f"model {ref.name!r}: has {model.config.num_labels} labels; a reward model has 1 "
            "(a score) or 2 (the second label's log-odds is used)"
        )
    return T.place(model, options, device)


def score(model: Any, input_ids: Any, attention_mask: Any) -> Any:
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits.float()
    return logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0]


FAMILY = Family("sequence-classifier", "AutoModelForSequenceClassification, 1 label (or 2: log-odds)", load, score)
FAMILIES.add(FAMILY.name, FAMILY)
