"""``dpo:<policy>,<reference>``: the implicit reward of a DPO-trained policy, as RewardBench computes it:
the sum over the answer's tokens of log p_policy - log p_reference (beta left out: it does not change
any ranking). Both models must share the policy's tokenizer, whose chat template renders the text.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, ScoreText


class DPORewardModel(RewardModel):
    kind = "dpo"

    def __init__(self, target, options):
        super().__init__(target, options)
        policy, sep, reference = target.partition(",")
        if not sep or not policy.strip() or not reference.strip():
            raise RMBError(f"--rm dpo:{target}: expected dpo:<policy>,<reference>")
        self.policy_name, self.reference_name = policy.strip(), reference.strip()
        self.refs = (T.locate(self.policy_name, options), T.locate(self.reference_name, options))
        self.device = T.resolve_device(options)
        self.tokenizer = T.load_tokenizer(self.refs[0], options)
        self.models = None
        self.stats = {"truncated": 0}

    def describe(self) -> dict:
        return {
            "policy": T.model_identity(self.refs[0], self.options),
            "reference": T.model_identity(self.refs[1], self.options),
            **T.describe_common(self.tokenizer, self.options, self.device),
        }

    def system_turn_handling(self) -> str:
        return "rendered as a system turn by the policy's chat template"

    def _load(self):
        if self.models is None:
            from transformers import AutoModelForCausalLM

            if self.options.deterministic:
                T.deterministic_kernels()

            dtype = T.torch_dtype(T.resolve_dtype(self.options, self.device))
            models = []
            for ref in self.refs:
                model = T.load_checked(AutoModelForCausalLM, ref, self.options, "a causal LM", dtype=dtype)
                models.append(model.to(self.device).eval())
            vocab = [m.get_output_embeddings().weight.shape[0] for m in models]
            if vocab[0] != vocab[1]:
                raise RMBError(
                    f"dpo: policy {self.policy_name!r} and reference {self.reference_name!r} have different "
                    f"vocabularies ({vocab[0]} vs {vocab[1]} tokens)"
                )
            self.models = models
            self.max_length = self.options.max_length or T.max_positions(models[0].config, self.tokenizer)
        return self.models

    def encode(self, text: ScoreText) -> tuple[list[int], int]:
        """Token ids of the whole text and how many of them, at the end, belong to the answer."""
        tok = self.tokenizer
        prompt = tok.apply_chat_template(T.messages(text.conversation), tokenize=False, add_generation_prompt=True)
        full = T.render(tok, text.conversation, text.answer)
        if not full.startswith(prompt):
            raise RMBError(
                f"dpo: the chat template of {self.policy_name!r} does not render the conversation as a "
                "prefix of conversation + answer; give one that does with --chat-template"
            )
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tok(full[len(prompt) :], add_special_tokens=False)["input_ids"]
        ids, cut = T.truncate_left(prompt_ids + answer_ids, self.max_length)
        self.stats["truncated"] += cut
        # The first token is never predicted, so at most len(ids) - 1 answer tokens are scored.
        return ids, min(len(answer_ids), len(ids) - 1)

    def _answer_logprob(self, model, input_ids, mask, n_answer):
        import torch

        with torch.inference_mode():
            logits = model(input_ids=input_ids, attention_mask=mask).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        ends = (mask.sum(dim=1) - 1).tolist()
        # Target position p predicts token p + 1; answer tokens are the last n_answer real tokens. Each row's
        # slice is summed alone: a sum over the padded width would change its rounding with the batch.
        return torch.stack([logp[i, end - n : end].sum() for i, (end, n) in enumerate(zip(ends, n_answer.tolist()))])

    def _rewards(self, batch: list[tuple[list[int], int]]) -> list[float]:
        import torch

        policy, reference = self._load()
        input_ids, mask = T.pad([ids for ids, _ in batch], self.tokenizer.pad_token_id, self.device)
        n_answer = torch.tensor([n for _, n in batch], device=input_ids.device)
        reward = self._answer_logprob(policy, input_ids, mask, n_answer) - self._answer_logprob(
            reference, input_ids, mask, n_answer
        )
        return reward.cpu().tolist()

    def score_stream(self, texts: Sequence[ScoreText]) -> Iterator[tuple[list[int], list[float]]]:
        self._load()
        encoded = [self.encode(t) for t in texts]
        batches = list(T.sorted_batches([len(ids) for ids, _ in encoded], T.batch_size(self.options)))
        scored: dict[int, float] = {}
        for idx in batches:
            rewards = self._rewards([encoded[i] for i in idx])
            scored.update(zip(idx, rewards))
            yield idx, rewards
        shared = sorted(i for b in batches if len(b) > 1 for i in b)
        dtype = T.resolve_dtype(self.options, self.device)
        if not shared:
            self.stats["batch_check"] = {"rescored": 0, "batch_size": T.batch_size(self.options), "dtype": dtype}
            return
        sample = [shared[k] for k in T.check_sample(len(shared))]
        alone = [self._rewards([encoded[i]])[0] for i in sample]
        self.stats["batch_check"] = T.batch_check([scored[i] for i in sample], alone, self.options, dtype, self.device)

    def close(self) -> None:
        self.models = None


ADAPTERS.add(DPORewardModel.kind, DPORewardModel)
