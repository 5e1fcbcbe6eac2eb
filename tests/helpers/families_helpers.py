"""Shared by the reward-model adapter and family tests: the texts every family scores, a small release, and the
set-up of a tiny randomly initialised look-alike (its config, its checkpoint, its backbone run by hand).
torch and transformers are imported inside the functions: the tests that need them skip where they are absent."""

from __future__ import annotations

import shutil
from pathlib import Path

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.evaluate.adapters import ScoreText
from rmb_build.release.read import Release


def texts() -> list[ScoreText]:
    """Three texts of different lengths, one multi-turn, so that a batch needs padding."""
    hello = (Turn("user", "Say hello."),)
    multi = (Turn("user", "Name a colour."), Turn("assistant", "Blue."), Turn("user", "Another, with a reason?"))
    return [
        ScoreText("a", hello, "Hello!"),
        ScoreText("b", multi, "Green, like grass in spring. " * 3),
        ScoreText("c", hello, "No. " * 20),
    ]


def small_release() -> Release:
    """Mixed lengths, a multi-turn conversation, and a text shared by a pairwise and a BoN item."""
    hello = (Turn("user", "Say hello.", "en"),)
    multi = (Turn("user", "Name a colour."), Turn("assistant", "Blue."), Turn("user", "Another one, with a reason?"))
    release = Release(name="small", root=None)
    release.add(
        PairwiseItem("0", hello, Answer("a", "Hello!"), Answer("b", "No. " * 40), "Helpfulness/Chat/Discussion")
    )
    release.add(
        PairwiseItem(
            "1", multi, Answer("a", "Green, like grass in spring."), Answer("b", "Red."), "Helpfulness/Chat/Discussion"
        )
    )
    release.add(
        PairwiseItem(
            "2", hello, Answer("a", "Hi there, nice to meet you. " * 6), Answer("b", "Hello!"), "Harmlessness/S6"
        )
    )
    release.add(
        BonItem(
            "0",
            hello,
            Answer("a", "Hello!"),
            (Answer("b", "Go away."), Answer("c", "Hey " * 30)),
            "Helpfulness/Chat/Discussion",
        )
    )
    return release


HIDDEN = 32
# A real architecture at toy widths: every look-alike's backbone
TINY = dict(
    hidden_size=HIDDEN,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)


def tiny_config(config_class, vocab_size: int, **extra):
    """``config_class`` (``transformers.LlamaConfig``, ...) at the toy widths; ``extra`` adds keys or overrides."""
    return config_class(**{"vocab_size": vocab_size, **TINY, **extra})


def save_lookalike(folder: Path, model, tokenizer) -> Path:
    """The model and its tokenizer written into ``folder``, as a checkpoint on the Hub is laid out."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def last_hidden(folder: Path, backbone_prefix: str, ids: list[int], backbone=None):
    """The backbone alone on one unpadded text, its weights read from the checkpoint's ``backbone_prefix.*``:
    (the last position's hidden state, the checkpoint's tensors). ``backbone``: transformers' class for it
    (``transformers.LlamaModel``), else the one ``AutoModel`` picks for the folder's config."""
    import torch
    import transformers
    from safetensors.torch import load_file

    if backbone is None:
        model = transformers.AutoModel.from_config(transformers.AutoConfig.from_pretrained(folder))
    else:
        model = backbone(backbone.config_class.from_pretrained(folder))
    model.eval()
    saved = load_file(str(folder / "model.safetensors"))
    prefix = backbone_prefix + "."
    model.load_state_dict({k[len(prefix) :]: v for k, v in saved.items() if k.startswith(prefix)})
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1], saved


def without_tensors(folder: Path, copy: Path, *names: str) -> Path:
    """A copy of the checkpoint in ``folder`` whose model.safetensors lacks the tensors ``names``."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(folder, copy)
    saved = load_file(str(copy / "model.safetensors"))
    for name in names:
        del saved[name]
    save_file(saved, str(copy / "model.safetensors"), metadata={"format": "pt"})
    return copy
