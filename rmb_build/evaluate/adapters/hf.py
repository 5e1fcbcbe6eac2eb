"""``hf:<path or hub id>``: a transformers reward model of one of the families in
``rmb_build.evaluate.families`` (``--family``; default: a sequence classifier).

Each text goes through the tokenizer's chat template; texts are tokenized once, cut as the harness
protocol says (``--protocol``, ``evaluate/protocols.py``; ``native``: to ``--max-length`` or the model's
own limit from the left, the answer's end being where the score is read; cut texts are counted), and
scored in batches of similar token length to cut padding. The family loads the model (refusing any
parameter its checkpoint lacks) and reads the reward. With ``options.shard`` (``--devices``) a replica
scores only its share of the batches, the same batches one device would form.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Turn
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, ScoreText
from rmb_build.evaluate.families import DEFAULT, family
from rmb_build.evaluate.families._known import apply, check_status, lookup
from rmb_build.evaluate.protocols import protocol, record


class HFRewardModel(RewardModel):
    kind = "hf"

    @classmethod
    def check_target(cls, target: str) -> None:
        T.check_model_name(target)

    def __init__(self, target, options):
        self.known_model = lookup(target)
        self.protocol = protocol(options.protocol)
        self.user_max_length = options.max_length
        options = apply(self.known_model, options)
        if self.protocol.limit != "model":  # a harness cuts at its own length, whatever a known-models row says
            options = dataclasses.replace(options, max_length=self.user_max_length)
        super().__init__(target, options)
        self.ref = T.locate(target, options)
        if self.known_model is not None:  # results.json records whether the row's card example was reproduced
            self.known_model = dataclasses.replace(
                self.known_model, check=check_status(self.known_model, self.ref.commit)
            )
        self.device = T.resolve_device(options)
        if options.dtype == "auto" and self.protocol.gpu_dtype and self.device.startswith("cuda"):
            self.options = options = dataclasses.replace(options, dtype=self.protocol.gpu_dtype)
        self.tokenizer = T.load_tokenizer(self.ref, options)
        side = self.protocol.truncation_side
        self.side = self.tokenizer.truncation_side if side == "tokenizer" else side
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
        if self.protocol.name != "native":  # native is what rmb always did: earlier fingerprints stay valid
            out["protocol"] = {
                **self.protocol.settings(),
                "max_length": self.cut_length(),
                "truncation_side": self.side,
            }
        return out

    def cut_length(self) -> int | None:
        """Where a harness protocol cuts (``--max-length`` wins); None under native (the model's limit, found
        once the model is loaded) and for a harness that never cuts."""
        if self.user_max_length is not None:
            return self.user_max_length
        return self.protocol.max_length if self.protocol.limit == "fixed" else None

    def protocol_record(self) -> dict:
        """results.json's ``protocol``: the named settings as this run resolved them."""
        if self.protocol.limit == "model":  # the model's own limit, read from its config without loading it
            config = T.load_config(self.ref, self.options) if self.model is None else self.model.config
            length = self.options.max_length or T.max_positions(config, self.tokenizer)
        else:
            length = self.cut_length()
        overridden = ["max_length"] if self.user_max_length is not None else []
        return record(
            self.protocol,
            max_length=length,
            truncation_side=self.side,
            overridden=overridden,
            applies=True,
            padding="none: each text alone" if self.family.alone else "right",
            harness_padding=self.tokenizer.rmb_own_padding_side
            if self.protocol.harness_padding == "tokenizer"
            else self.protocol.harness_padding,
        )

    def system_turn_handling(self) -> str:
        if self.protocol.roles == "alternate":
            return (
                "roles by position, as the harness relabels turns: the system turn read as the user's and each "
                "later turn's role flipped; the harness itself refuses such a conversation (its last prompt turn "
                "must be the user's), so these items have no harness score to match"
            )
        return "rendered as a system turn by the chat template"

    def _load(self):
        if self.model is None:
            if self.options.deterministic:
                T.deterministic_kernels()
            dtype = T.torch_dtype(T.resolve_dtype(self.options, self.device))
            if self.family.needs_remote_code and not self.options.trust_remote_code:
                raise RMBError(
                    f"model {self.ref.name!r}: the {self.family.name} family runs the model's own code; add "
                    "--trust-remote-code to run it"
                )
            model = self.family.load(self.ref, self.options, self.device, dtype)
            if getattr(model, "config", None) is not None and self.tokenizer.pad_token_id is not None:
                model.config.pad_token_id = self.tokenizer.pad_token_id
            self.model = model
            self.device = T.input_device(model, self.options, self.device)
            if self.protocol.limit == "model":
                self.max_length = self.options.max_length or T.max_positions(model.config, self.tokenizer)
            else:
                self.max_length = self.cut_length()
        return self.model

    def encode(self, texts: Sequence[ScoreText]) -> list[list[int]]:
        """Token ids of each text, cut to the maximum length (cuts are counted in ``stats``)."""
        self._load()
        p = self.protocol
        if p.name == "native":
            system = self.known_model.system if self.known_model is not None else None
            rendered = [T.render(self.tokenizer, with_system(t.conversation, system), t.answer) for t in texts]
        else:  # a harness knows no row's system prompt
            convs = [alternate(t.conversation) if p.roles == "alternate" else t.conversation for t in texts]
            rendered = [T.render(self.tokenizer, c, t.answer) for c, t in zip(convs, texts)]
        out = []
        self.cut = []  # per text: whether it was cut
        finish = self.family.finish_ids
        for text, ids in zip(rendered, self.tokenizer(rendered, add_special_tokens=p.special_tokens)["input_ids"]):
            cut = p.name != "native" and self.max_length is not None and len(ids) > self.max_length
            if cut:
                ids = self._tokenizer_cut(text)  # the harness's own call: specials kept, the text cut around them
            if finish is not None:
                ids = finish(self.model, self.tokenizer, ids)
            if p.name == "native":
                ids, cut = T.truncate_left(ids, self.max_length)
            self.cut.append(cut)
            out.append(ids)
        self.stats["truncated"] += sum(self.cut)
        if p.name != "native":  # a harness may hand a model more tokens than it was built for: say how often
            limit = T.max_positions(self.model.config, self.tokenizer)
            self.beyond = [limit is not None and len(ids) > limit for ids in out]
            self.stats["beyond_model_limit"] = self.stats.get("beyond_model_limit", 0) + sum(self.beyond)
        return out

    def _tokenizer_cut(self, text: str) -> list[int]:
        tok = self.tokenizer
        side, tok.truncation_side = tok.truncation_side, self.side
        try:
            return tok(
                text, add_special_tokens=self.protocol.special_tokens, truncation=True, max_length=self.max_length
            )["input_ids"]
        finally:
            tok.truncation_side = side

    def forward(self, batch: Sequence[Sequence[int]]) -> list[float]:
        """Scores of already-tokenized texts, one forward pass."""
        import torch

        input_ids, mask = T.pad(batch, self.tokenizer.pad_token_id, self.device)
        bos = self.tokenizer.bos_token_id if self.tokenizer.bos_token else None
        if self.protocol.double_bos == "mask" and bos is not None and input_ids.shape[1] > 1:
            # reward-bench's pipeline: a text starting with two BOS has the first one's attention masked
            double = (input_ids[:, 0] == bos) & (input_ids[:, 1] == bos) & (mask[:, 1] == 1)
            mask[double, 0] = 0
            self.stats["double_bos_masked"] = self.stats.get("double_bos_masked", 0) + int(double.sum())
        with torch.inference_mode():
            scores = self.family.score(self.model, input_ids, mask).float()
        self.stats["real_tokens"] += int(mask.sum())
        self.stats["padded_tokens"] += int(mask.numel())
        return scores.cpu().tolist()

    def score_stream(self, texts: Sequence[ScoreText]) -> Iterator[tuple[list[int], list[float]]]:
        ids = self.encode(texts)
        lengths = [len(x) for x in ids]
        batches = list(T.sorted_batches(lengths, T.batch_size(self.options)))
        if self.options.shard is not None:  # one replica of --devices: its share of the batches one device forms
            batches = T.share_batches(batches, lengths, *self.options.shard)
            mine = {i for b in batches for i in b}
            # each replica counts the texts of its own batches only
            self.stats["truncated"] -= sum(c for i, c in enumerate(self.cut) if i not in mine)
            if "beyond_model_limit" in self.stats:
                self.stats["beyond_model_limit"] -= sum(b for i, b in enumerate(self.beyond) if i not in mine)
        scored: dict[int, float] = {}
        for idx in batches:
            scores = self.forward([ids[i] for i in idx])
            scored.update(zip(idx, scores))
            yield idx, scores
        if self.options.shard is None:  # a replica of --devices leaves it to one device's run
            self.stats["batch_check"] = self.batch_check(ids, scored, batches)

    def batch_check(self, ids: list[list[int]], scored: dict[int, float], batches: list[list[int]]) -> dict:
        """A sample of the texts scored in batches of two or more, scored again alone: how far the batch moved
        them (``loading.batch_check``; none where every text ran alone)."""
        shared = sorted(i for b in batches if len(b) > 1 for i in b)
        dtype = T.resolve_dtype(self.options, self.device)
        if not shared or self.family.alone:
            why = "the family runs each text alone" if self.family.alone else "every text was scored alone"
            return {"rescored": 0, "batch_size": T.batch_size(self.options), "dtype": dtype, "note": why}
        sample = [shared[k] for k in T.check_sample(len(shared))]
        counts = dict(self.stats)  # the re-scoring is not the run's work: its tokens are not counted
        alone = [self.forward([ids[i]])[0] for i in sample]
        self.stats.update(
            {k: v for k, v in counts.items() if k in ("real_tokens", "padded_tokens", "double_bos_masked")}
        )
        return T.batch_check([scored[i] for i in sample], alone, self.options, dtype, self.device)

    def close(self) -> None:
        self.model = None


def alternate(conversation):
    """Turns with roles by position, as reward-bench's ``prepare_dialogue_from_tokenizer`` gives them: user
    at even positions, assistant at odd ones (whatever the role field says)."""
    return tuple(dataclasses.replace(t, role="assistant" if i % 2 else "user") for i, t in enumerate(conversation))


def with_system(conversation, system: str | None):
    """``conversation`` with a system turn first when the row gives one and the conversation has none."""
    if system is None or (conversation and conversation[0].role == "system"):
        return conversation
    return (Turn("system", system), *conversation)


ADAPTERS.add(HFRewardModel.kind, HFRewardModel)
