"""``hf:<path or hub id>``: a transformers reward model of one of the families in
``rmb_build.evaluate.families`` (``--family``; default: a sequence classifier).

Each text goes through the tokenizer's chat template; texts are tokenized once, cut to
``--max-length`` from the left (the answer's end is where the score is read; cut texts are
counted), and scored in batches of similar token length to cut padding. The family loads the
model (refusing any parameter its checkpoint lacks) and reads the reward.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

from rmb_build.core.items import Turn
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.adapters import RewardModel, ScoreText
from rmb_build.evaluate.families import DEFAULT, family
from rmb_build.evaluate.families._known import apply, check_status, lookup


class HFRewardModel(RewardModel):
    kind = "hf"

    def __init__(self, target, options):
        self.known_model = lookup(target)
        options = apply(self.known_model, options)
        super().__init__(target, options)
        self.ref = T.locate(target, options)
        if self.known_model is not None:  # results.json records whether the row's card example was reproduced
            self.known_model = dataclasses.replace(
                self.known_model, check=check_status(self.known_model, self.ref.commit)
            )
        self.device = T.resolve_device(options)
        self.tokenizer = T.load_tokenizer(self.ref, options)
        self.family = family(options.family or DEFAULT)
        self.model = None
        self.stats = {"truncated": 0, "real_tokens": 0, "padded_tokens": 0}

    def describe(self) -> dict:
        out = {
            "model": T.model_identity(self.ref, self.options),
            **T.describe_common(self.tokenizer, self.options, self.device),
        }
        if self.family.name != DEFAULT:  # only when set, so earlier fingerprints stay valid
            out["family"] = self.family.name
        if self.known_model is not None:
            out["known_model"] = self.known_model.settings()
        return out

    def _load(self):
        if self.model is None:
            dtype = T.torch_dtype(T.resolve_dtype(self.options, self.device))
            model = self.family.load(self.ref, self.options, self.device, dtype)
            if getattr(model, "config", None) is not None and self.tokenizer.pad_token_id is not None:
                model.config.pad_token_id = self.tokenizer.pad_token_id
            self.model = model
            self.device = T.input_device(model, self.options, self.device)
            self.max_length = self.options.max_length or T.max_positions(model.config, self.tokenizer)
        return self.model

    def encode(self, texts: Sequence[ScoreText]) -> list[list[int]]:
        """Token ids of each text, cut to the maximum length (cuts are counted in ``stats``)."""
        self._load()
        system = self.known_model.system if self.known_model is not None else None
        rendered = [T.render(self.tokenizer, with_system(t.conversation, system), t.answer) for t in texts]
        out = []
        finish = self.family.finish_ids
        for ids in self.tokenizer(rendered, add_special_tokens=False)["input_ids"]:
            if finish is not None:
                ids = finish(self.model, self.tokenizer, ids)
            ids, cut = T.truncate_left(ids, self.max_length)
            self.stats["truncated"] += cut
            out.append(ids)
        return out

    def forward(self, batch: Sequence[Sequence[int]]) -> list[float]:
        """Scores of already-tokenized texts, one forward pass."""
        import torch

        input_ids, mask = T.pad(batch, self.tokenizer.pad_token_id, self.device)
        with torch.inference_mode():
            scores = self.family.score(self.model, input_ids, mask).float()
        self.stats["real_tokens"] += int(mask.sum())
        self.stats["padded_tokens"] += int(mask.numel())
        return scores.cpu().tolist()

    def score_stream(self, texts: Sequence[ScoreText]) -> Iterator[tuple[list[int], list[float]]]:
        ids = self.encode(texts)
        for idx in T.sorted_batches([len(x) for x in ids], self.options.batch_size):
            yield idx, self.forward([ids[i] for i in idx])

    def close(self) -> None:
        self.model = None


def with_system(conversation, system: str | None):
    """``conversation`` with a system turn first when the row gives one and the conversation has none."""
    if system is None or (conversation and conversation[0].role == "system"):
        return conversation
    return (Turn("system", system), *conversation)


ADAPTER = HFRewardModel
