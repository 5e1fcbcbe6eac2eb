"""Shared by the protocol tests: a tiny randomly initialised reward model whose tokenizer adds a BOS and whose
chat template writes one too (so texts start with two, as Llama-3 and Gemma RMs do under reward-bench's
pipeline), long enough (4096 positions) that texts over 2048 tokens can be scored uncut."""

from __future__ import annotations

import json
from pathlib import Path

from families_helpers import tiny_config

from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.evaluate.adapters import ScoreText
from rmb_build.release.read import Release

TEMPLATE = "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
WORDS = "Hello there, how are you? I am fine. The quick brown fox jumps over the lazy dog. "


def build_model(folder: Path, seed: int = 0, positions: int = 4096, arch: str = "llama", **widths) -> str:
    """The model folder: a byte-level BPE tokenizer (BOS added by its post-processor) and a 2-layer
    LlamaForSequenceClassification with 1 label (``arch="gpt2"``: a GPT2ForSequenceClassification, whose
    positions are learned and absolute); loadable by transformers 4 (the rewardbench venv) and 5. ``widths``
    override the toy widths (``hidden_size=256``)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tk.train_from_iterator([WORDS] * 20, trainer)
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tk.token_to_id("<s>"))])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    tok.chat_template = TEMPLATE
    tok.save_pretrained(folder)
    config = folder / "tokenizer_config.json"  # the class and inputs transformers 4 needs too
    data = json.loads(config.read_text())
    data.update(
        tokenizer_class="PreTrainedTokenizerFast",
        chat_template=TEMPLATE,
        model_input_names=["input_ids", "attention_mask"],
    )
    config.write_text(json.dumps(data))
    torch.manual_seed(seed)
    ids = dict(
        num_labels=1, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id
    )
    if arch == "gpt2":
        cfg = transformers.GPT2Config(
            vocab_size=len(tok), n_positions=positions, n_embd=widths.get("hidden_size", 32), n_layer=2, n_head=4, **ids
        )
        transformers.GPT2ForSequenceClassification(cfg).save_pretrained(folder)
        return str(folder)
    cfg = tiny_config(transformers.LlamaConfig, len(tok), max_position_embeddings=positions, **ids, **widths)
    transformers.LlamaForSequenceClassification(cfg).save_pretrained(folder)
    return str(folder)


def conversations() -> list[tuple[tuple[Turn, ...], str, str]]:
    """(conversation, chosen, rejected): short and long (over 2048 tokens) answers, multi-turn, a system turn."""
    hello = (Turn("user", "Hello there, how are you?"),)
    multi = (Turn("user", "The quick brown fox?"), Turn("assistant", "Jumps."), Turn("user", "Over the lazy dog?"))
    system = (Turn("system", "I am fine."), Turn("user", "How are you?"))
    long = WORDS * 120  # about 2600 tokens
    return [
        (hello, "I am fine.", "The lazy dog."),
        (hello, long, "Hello there."),
        (multi, "Yes, over the lazy dog.", long + "The end."),
        (system, "Fine, thank you.", "How are you?"),
        (multi, "Brown " * 40, "Quick."),
    ]


def texts() -> list[ScoreText]:
    return [ScoreText(f"{i}{side}", c, a) for i, (c, *ans) in enumerate(conversations()) for side, a in zip("cr", ans)]


def release() -> Release:
    out = Release(name="protocols", root=None)
    for i, (conv, chosen, rejected) in enumerate(conversations()):
        scenario = "Harmlessness/S6" if i % 2 else "Helpfulness/Chat/Discussion"
        out.add(PairwiseItem(str(i), conv, Answer("a", chosen), Answer("b", rejected), scenario))
    return out
