"""Prompt tokens of a request not yet sent: exact where the model's own tokenizer is here, else estimated.

An embedded model's GGUF file carries its tokenizer and chat template; read without its weights it renders and
counts a request's prompt exactly as the embedded server does (its ``usage.prompt_tokens``): llama.cpp's
vocabulary-only model (a tenth of a second) for the llama_cpp backend, the torch backend's own tokenizer
(``torch_engine.served_tokenizer``: seconds, mostly torch's import) for torch, each the other's stand-in where
only the other is installed. Any other endpoint's model is out of reach, so its count is the character estimate
(``cost.estimate_prompt_tokens``), scaled by how far that estimate fell short of the endpoint's real counts on
the replies already cached, where there are any.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
from typing import TYPE_CHECKING, Callable, Iterator

from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.types import ChatRequest

if TYPE_CHECKING:
    from rmb_build.llm.embedded_models import EmbeddedModel

Counter = Callable[[ChatRequest], int]


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def exact_counter(endpoint: EndpointConfig) -> Counter | None:
    """A function giving a request's exact prompt tokens on ``endpoint``; None where it cannot be exact
    (a remote endpoint, or an embedded model whose chat format is not its GGUF's own template)."""
    if not endpoint.embedded:
        return None
    counters = (
        (_torch_counter, _gguf_counter) if endpoint.embedded_backend == "torch" else (_gguf_counter, _torch_counter)
    )
    return next((c for c in (counter(endpoint.embedded) for counter in counters) if c is not None), None)


def _own_template(model: str) -> EmbeddedModel | None:
    """The embedded model ``model`` where it chats in its own template (no chat format of ours): only then can
    its tokenizer count a prompt as its server renders it."""
    from rmb_build.llm.embedded_models import EMBEDDED

    entry = EMBEDDED.get(model) if model in EMBEDDED else None
    return entry if entry is not None and entry.chat_format is None else None


@functools.lru_cache(maxsize=None)
def _torch_counter(model: str) -> Counter | None:
    """The torch server's own count: its tokenizer (the prepared model's, else the same read from the GGUF file)
    and ``torch_engine.chat_prompt_tokens``."""
    from rmb_build.llm.embedded_models import MissingModelPackage, ready_model_cache

    entry = _own_template(model)
    if entry is None:
        return None
    try:
        from rmb_build.llm.torch_engine import chat_prompt_tokens, served_tokenizer

        tokenizer = served_tokenizer(entry.locate(), ready_model_cache())
        if not getattr(tokenizer, "chat_template", None):
            return None
    except (ImportError, MissingModelPackage, OSError, ValueError):
        return None

    def count(req: ChatRequest) -> int:
        return len(chat_prompt_tokens(tokenizer, req.message_dicts()))

    return count


@functools.lru_cache(maxsize=None)
def _gguf_counter(model: str) -> Counter | None:
    from rmb_build.llm.embedded_models import MissingModelPackage

    entry = _own_template(model)
    if entry is None:
        return None
    try:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        with _quiet_stderr():  # llama.cpp logs its context sizes to fd 2 even with verbose=False
            llm = Llama(model_path=str(entry.locate()), vocab_only=True, verbose=False)
    except (ImportError, MissingModelPackage, OSError, ValueError):
        return None
    # Freed before the interpreter tears llama_cpp's module down: left to Llama.__del__ at exit, the free
    # finds its C function already gone and prints a traceback after the run's own output.
    atexit.register(llm.close)
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    token_text = llm._model.token_get_text
    render = Jinja2ChatFormatter(
        template=template,
        eos_token=token_text(llm.token_eos()),
        bos_token=token_text(llm.token_bos()),
        add_generation_prompt=True,
    )

    def count(req: ChatRequest) -> int:
        # llama_cpp types messages as one TypedDict per role (Literal roles); ours are the same {role, content}
        # dicts with the role a str, which its formatter reads as they are
        prompt = render(messages=req.message_dicts()).prompt  # type: ignore[arg-type]
        return len(llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))

    return count


__all__ = ["Counter", "exact_counter"]
