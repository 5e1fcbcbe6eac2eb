"""``pairrm:<folder or Hub id>``: PairRM (llm-blender's pairwise reward model) as a pair judge.

PairRM reads one sequence holding the prompt and both answers, each segment tokenized on its own
(with the tokenizer's [CLS] ... [SEP]) and led by a special token::

    [CLS] <|source|> prompt [SEP] [CLS] <|candidate1|> answer A [SEP] [CLS] <|candidate2|> answer B [SEP]

A DeBERTa-v3 encoder runs over it; the head (Linear(2h, h), Tanh, Linear(h, n_tasks)) scores the
concatenation of the final hidden states at ``<|source|>`` and ``<|candidate1|>``, and the same for
``<|candidate2|>``; the logit that A beats B is the mean over tasks of the difference. Each pair is
read in both orders: vote ``ab`` is 1 when logit(first answer as A) > 0, ``ba`` is the same with the
answers swapped.

The checkpoint is the transformers layout of ``llm-blender/PairRM-hf`` (also ``mightbe/Better-PairRM``):
a DeBERTa-v2 ``config.json`` carrying ``source_prefix_id``, ``cand1_prefix_id``, ``cand2_prefix_id``
and ``n_tasks``; weights ``pretrained_model.*`` (the encoder) and ``head_layer.1.*``, ``head_layer.4.*``
(the head's two linear layers; 0 and 3 are dropouts, 2 the tanh). It loads through a checked path:
a checkpoint without the head is refused, nothing is randomly initialised. The original
``llm-blender/PairRM`` folder (for the llm_blender package, no DeBERTa config) is not this layout.

Text, as llm-blender builds it: a single user turn is the source as is, the answers the candidates
(``Blender.compare``); a longer conversation uses its conversation format (``compare_conversations``):
the source is an instruction and ``USER: ...`` lines with ``Assistant: <Response k>`` placeholders,
a candidate is the ``<Response k>: ...`` lines of the assistant turns, the answer being the last.
System turns, which PairRM has no place for, lead the source as plain text. Segment limits are
llm-blender's: the source at most 1224 tokens, each candidate at most (2048 - source) // 2, each cut
at its end; ``--max-length`` changes the 2048 total (the source keeps its 1224/2048 share).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Conversation
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.adapters import ADAPTERS, JudgePair, PairJudge, RewardModel
from rmb_build.evaluate.families import rowwise

SOURCE, CAND1, CAND2 = "<|source|>", "<|candidate1|>", "<|candidate2|>"
SOURCE_MAX, TOTAL_MAX = 1224, 2048  # llm-blender's source_max_length, and source + 2 * candidate_max_length (412)
CONV_INSTRUCTION = "Finish the following coversation in each i-th turn by filling in <Response i> with your response."
FORMAT = "pairrm-1"  # bump when the text or the truncation below changes: scores cached under it go stale
CONFIG_IDS = {SOURCE: "source_prefix_id", CAND1: "cand1_prefix_id", CAND2: "cand2_prefix_id"}


def pair_texts(conversation: Conversation, first: str, second: str) -> tuple[str, str, str]:
    """(source, candidate A, candidate B) without their prefix tokens, as llm-blender writes them."""
    system = [t.content for t in conversation if t.role == "system"]
    turns = [t for t in conversation if t.role != "system"]
    lead = "".join(s + "\n" for s in system)
    if len(turns) == 1 and turns[0].role == "user":
        return lead + turns[0].content, first, second
    source, history, k = [], [], 0
    for turn in turns:
        if turn.role == "assistant":
            k += 1
            source.append(f"Assistant: <Response {k}>")
            history.append(f"<Response {k}>: {turn.content}")
        else:
            source.append(f"USER: {turn.content}")
    k += 1
    source.append(f"Assistant: <Response {k}>")
    # llm-blender joins each user line with its placeholder by "\n", and the pairs by "\n" again.
    candidates = ["\n".join(history + [f"<Response {k}>: {answer}"]) for answer in (first, second)]
    return lead + CONV_INSTRUCTION + "\n".join(source), candidates[0], candidates[1]


class PairRM(PairJudge):
    kind = "pairrm"

    def __init__(self, target, options):
        RewardModel.__init__(self, target, options)
        self.ref = T.locate(target, options)
        self.device = T.resolve_device(options)
        self.tokenizer = self._load_tokenizer()
        self.prefix_ids = {tok: self.tokenizer.convert_tokens_to_ids(tok) for tok in (SOURCE, CAND1, CAND2)}
        unknown = [tok for tok, i in self.prefix_ids.items() if i is None or i == self.tokenizer.unk_token_id]
        if unknown:
            raise RMBError(
                f"model {target!r}: its tokenizer lacks PairRM's special token(s) {', '.join(unknown)}; "
                "it is not a PairRM checkpoint (llm-blender/PairRM-hf layout)"
            )
        total = options.max_length or TOTAL_MAX
        self.limits = (max(3, total * SOURCE_MAX // TOTAL_MAX), total)
        self.model = None
        self.stats = {"truncated": 0}

    def _load_tokenizer(self):
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(self.ref.path, **T.load_kwargs(self.ref, self.options, model=False))
        except (OSError, ValueError) as exc:
            raise T.load_error(self.ref, "its tokenizer", exc) from None
        if tok.pad_token_id is None:
            raise RMBError(f"model {self.target!r}: its tokenizer has no padding token")
        return tok

    def describe(self) -> dict:
        ids = ",".join(f"{t}={i}" for t, i in sorted(self.prefix_ids.items()))
        out: dict[str, Any] = {
            "model": T.model_identity(self.ref, self.options),
            "dtype": T.resolve_dtype(self.options, self.device),
            "max_length": self.options.max_length,
            "format": FORMAT,
            "special_tokens": hashlib.sha256(ids.encode()).hexdigest()[:16],
        }
        if self.options.revision:
            out["revision"] = self.options.revision
        attn = T.attention(self.options, self.device)
        if attn:
            out["attn_implementation"] = attn
        if self.options.deterministic:
            out["deterministic"] = True
        return out

    def system_turn_handling(self) -> str:
        return "its text leads PairRM's source as plain text (PairRM has no system turn)"

    def _load(self):
        if self.model is None:
            if self.options.deterministic:
                T.deterministic_kernels()
            model_class = _model_class()
            dtype = T.torch_dtype(T.resolve_dtype(self.options, self.device))
            model = T.load_checked(
                model_class, self.ref, self.options, "a PairRM model (DeBERTa-v2 + pairwise head)", dtype=dtype
            )
            for tok, attr in CONFIG_IDS.items():
                want = getattr(model.config, attr, None)
                if want is not None and want != self.prefix_ids[tok]:
                    raise RMBError(
                        f"model {self.target!r}: config.json's {attr} is {want}, but its tokenizer gives "
                        f"{tok} the id {self.prefix_ids[tok]}; the tokenizer does not belong to the model"
                    )
            self.model = model.to(self.device).eval()
        return self.model

    # ---- encoding -----------------------------------------------------------------------------------

    def _segment(self, prefix: str, text: str, limit: int) -> tuple[list[int], int]:
        """Token ids of prefix + text (the tokenizer's own specials around), cut at ``limit``; and the
        prefix token's position in them."""
        tok = self.tokenizer
        ids = tok(prefix + text, add_special_tokens=True)["input_ids"]
        if len(ids) > limit:
            ids = tok(prefix + text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
            self.stats["truncated"] += 1
        want = self.prefix_ids[prefix]
        if want not in ids:
            raise RMBError(f"pairrm: the tokenizer of {self.target!r} did not keep {prefix} as one token")
        return ids, ids.index(want)

    def encode(self, conversation: Conversation, first: str, second: str) -> tuple[list[int], tuple[int, int, int]]:
        """The ids PairRM reads for (first as A, second as B), and the positions of its three prefix tokens."""
        source, cand1, cand2 = pair_texts(conversation, first, second)
        source_max, total = self.limits
        src, p0 = self._segment(SOURCE, source, source_max)
        cand_max = max(3, (total - len(src)) // 2)
        c1, p1 = self._segment(CAND1, cand1, cand_max)
        c2, p2 = self._segment(CAND2, cand2, cand_max)
        return src + c1 + c2, (p0, len(src) + p1, len(src) + len(c1) + p2)

    # ---- judging ------------------------------------------------------------------------------------

    def logits(self, encoded: Sequence[tuple[list[int], tuple[int, int, int]]]) -> list[float]:
        """PairRM's logit (A beats B) for each encoded sequence, in batches of similar length."""
        import torch

        model = self._load()
        out: list[float] = [0.0] * len(encoded)
        for idx in T.sorted_batches([len(ids) for ids, _ in encoded], T.batch_size(self.options)):
            input_ids, mask = T.pad([encoded[i][0] for i in idx], self.tokenizer.pad_token_id, self.device)
            positions = torch.tensor([encoded[i][1] for i in idx], device=input_ids.device)
            with torch.inference_mode():
                got = model(input_ids=input_ids, attention_mask=mask, prefix_positions=positions)
            for i, v in zip(idx, got.float().cpu().tolist()):
                out[i] = v
        return out

    def judge_stream(self, pairs: Sequence[JudgePair]) -> Iterator[tuple[list[int], list[dict]]]:
        chunk = max(1, self.options.batch_size) * 4
        for start in range(0, len(pairs), chunk):
            idx = list(range(start, min(start + chunk, len(pairs))))
            encoded = []
            for i in idx:
                p = pairs[i]
                encoded += [
                    self.encode(p.conversation, p.first, p.second),
                    self.encode(p.conversation, p.second, p.first),
                ]
            got = [_vote(x) for x in self.logits(encoded)]
            yield idx, [{"ab": [got[2 * j]], "ba": [got[2 * j + 1]]} for j in range(len(idx))]

    def close(self) -> None:
        self.model = None


def _vote(logit: float) -> float:
    """1 if candidate 1 wins, else 0; a NaN logit is passed on as it is, for the scoring loop to refuse (it would
    otherwise be a silent 0)."""
    return 1 if logit > 0 else 0 if logit <= 0 else logit


_MODEL_CLASS = None


def _model_class():
    """PairRM's module layout (``pretrained_model`` + ``head_layer``) as a transformers model, built on first
    use so that importing this module does not import torch."""
    global _MODEL_CLASS
    if _MODEL_CLASS is not None:
        return _MODEL_CLASS
    import torch
    from torch import nn
    from transformers import DebertaV2Config, DebertaV2Model
    from transformers.models.deberta_v2.modeling_deberta_v2 import (
        DebertaV2PreTrainedModel,
    )

    class PairRMModel(DebertaV2PreTrainedModel):
        config_class = DebertaV2Config
        base_model_prefix = "pretrained_model"

        def __init__(self, config):
            super().__init__(config)
            hidden, p = config.hidden_size, float(getattr(config, "drop_out", 0.0) or 0.0)
            self.pretrained_model = DebertaV2Model(config)
            self.head_layer = nn.Sequential(
                nn.Dropout(p),
                nn.Linear(2 * hidden, hidden),
                nn.Tanh(),
                nn.Dropout(p),
                nn.Linear(hidden, int(getattr(config, "n_tasks", 1) or 1)),
            )
            self.post_init()

        def forward(self, input_ids, attention_mask, prefix_positions):
            """The logit that candidate 1 beats candidate 2; ``prefix_positions``: (batch, 3) positions of
            <|source|>, <|candidate1|>, <|candidate2|>."""
            hidden = self.pretrained_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            rows = torch.arange(hidden.shape[0], device=hidden.device)[:, None]
            source, cand1, cand2 = hidden[rows, prefix_positions].unbind(dim=1)
            # each pair's row alone (families.rowwise): the head's result would otherwise depend on the batch
            left = rowwise(self.head_layer, torch.cat([source, cand1], dim=-1))
            right = rowwise(self.head_layer, torch.cat([source, cand2], dim=-1))
            return (left - right).mean(dim=-1)

    _MODEL_CLASS = PairRMModel
    return PairRMModel


ADAPTERS.add(PairRM.kind, PairRM)
