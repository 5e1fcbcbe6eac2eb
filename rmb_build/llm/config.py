"""An endpoint's options (an OpenAI-compatible URL or the embedded server) and a model reference on one."""

from __future__ import annotations

import importlib.util
import os
from typing import Literal, Sequence, Unpack
from urllib.parse import urlparse

from pydantic import Field, field_validator, model_validator

from rmb_build.core.options import StrictModel
from rmb_build.core.redact import redact
from rmb_build.llm.types import ChatRequest, RequestFields

DEADLINE_S = 300.0
SILENCE_LIMIT_S = 600.0
MAX_REPLY_BYTES = 1 << 20  # a 512-token reply is a few kB; logprobs of every token at top-20 some 100s of kB


# What ``backend: auto`` takes, the first one installed: llama.cpp where it is (bench/embedded_backends.py,
# bench/README.md, 2 cores busy or idle: 4x the torch backend's tokens/s alone, 1.1-1.3x at 8 requests at once,
# a guard verdict 1.8x sooner), else torch, which installs without a compiler
AUTO_ORDER = ("llama_cpp", "torch")
BACKEND_MODULES = {"torch": ("llguidance", "gguf"), "llama_cpp": ("llama_cpp",)}
BACKEND_EXTRAS = {"torch": "build", "llama_cpp": "llama-cpp"}
# Requests one torch server decodes together: SmolLM2-135M on one CPU thread gave 25 tokens/s at 8 rows, 38 at 16,
# 49 at 32 (bench/README.md, `embedded_backends` section, 2026-11-28).
TORCH_MAX_BATCH = 32
# How long a torch server may take to start (``EmbeddedServer``): a first start dequantises the GGUF file into the
# model cache (a minute on 2 busy cores). Of it, TORCH_LOAD_S is kept for loading a prepared model (torch's import,
# the weights, the grammar's token table); a server waits for another preparing its model the rest at most, so it
# stops with one line naming that process before its parent's startup timeout kills it.
TORCH_STARTUP_S = 300.0
TORCH_LOAD_S = 60.0


def backend_installed(backend: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in BACKEND_MODULES[backend])


def backend_runs(backend: str, model: str | None) -> bool:
    """Whether ``backend`` can run embedded ``model``: torch needs the chat template in the GGUF file (a model
    with its own llama.cpp chat format, gemma3, has none)."""
    from rmb_build.llm.embedded_models import EMBEDDED

    return backend != "torch" or model is None or model not in EMBEDDED or EMBEDDED.get(model).chat_format is None


class Price(StrictModel):
    input: float = Field(ge=0, description="USD per million input tokens")
    output: float = Field(ge=0, description="USD per million output tokens")


class EndpointConfig(StrictModel):
    """An OpenAI-compatible endpoint, or the embedded local server (``embedded: smollm2``)."""

    embedded: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    structured_output: Literal["json_schema", "json_object", "none"] | None = None
    max_concurrency: int | None = Field(default=None, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=8, ge=0)
    outage_limit_s: float = Field(default=600.0, ge=0, description="keep retrying an unreachable endpoint this long")
    # None: the default below (unset, so a config and the manifest that records it read as before)
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        description=f"the longest one try of a request may take, sent to last byte (default {DEADLINE_S:g}): "
        "a reply trickled a byte at a time is cut there; counted as a timeout and retried",
    )
    silence_limit_s: float | None = Field(
        default=None,
        gt=0,
        description=f"stop the build when this endpoint, asked, has answered nothing for this long (default "
        f"{SILENCE_LIMIT_S:g}); every finished batch is kept",
    )
    max_reply_bytes: int | None = Field(
        default=None,
        ge=1024,
        description=f"refuse a reply body over this many bytes before it is read whole or cached (default "
        f"{MAX_REPLY_BYTES})",
    )
    price_per_mtok: Price | None = None
    n_ctx: int = Field(default=4096, ge=256, description="context size of an embedded server")
    servers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="embedded only: llama.cpp server processes, each answering one request at a time (a "
        "small model uses several cores better as several servers than as one with more threads)",
    )

    # None reads as auto (unset, so a config and the manifest that records it read as before)
    backend: Literal["auto", "torch", "llama_cpp"] | None = Field(
        default=None,
        description="embedded only: which server runs the model: torch (transformers on the dequantised GGUF, "
        "requests batched, JSON schemas by llguidance; the build extra), llama_cpp (llama-cpp-python, the llama-cpp "
        "extra, one request per server), or auto (the faster one installed: AUTO_ORDER)",
    )
    max_batch: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description=f"embedded torch backend only: requests each server decodes together (default {TORCH_MAX_BATCH})",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parsed = urlparse(v)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{redact(v)!r} is not an http(s) URL")
        try:
            _ = parsed.port
        except ValueError:  # the URL is not quoted: what looks like its port may be part of a password
            raise ValueError(
                "not a usable URL: what follows ':' in its host is not a port number (a password holding "
                "'/', '?' or '#' must be percent-encoded: %2F, %3F, %23)"
            ) from None
        return v.rstrip("/")

    @field_validator("embedded")
    @classmethod
    def _embedded(cls, v: str | None) -> str | None:
        from rmb_build.llm.embedded_models import EMBEDDED

        if v is not None and v not in EMBEDDED:
            raise ValueError(f"unknown embedded model {v!r} (known: {', '.join(EMBEDDED)})")
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> "EndpointConfig":
        if (self.embedded is None) == (self.base_url is None):
            raise ValueError("give exactly one of 'embedded' or 'base_url'")
        if self.embedded is None and self.servers != 1:
            raise ValueError("'servers' is for an embedded endpoint (a base_url endpoint has max_concurrency)")
        if self.embedded is None and (self.backend is not None or self.max_batch is not None):
            raise ValueError("'backend' and 'max_batch' are for an embedded endpoint")
        if self.embedded is not None:
            # llama_cpp.server runs one request at a time and answers HTTP 500 to json_schema; the torch
            # server reads both forms and decodes max_batch requests together.
            self.max_concurrency = self.servers * self.server_slots
            self.structured_output = self.structured_output or "json_object"
        else:
            self.max_concurrency = self.max_concurrency or 8
            self.structured_output = self.structured_output or "json_schema"
        return self

    @property
    def embedded_backend(self) -> str:
        """The backend that serves this embedded endpoint: the one asked for, or for ``auto`` the first of
        AUTO_ORDER installed that runs the model; when none is, the one the build extra installs (torch) where it
        runs the model, so that the missing-extra line shown is the one that compiles nothing."""
        if self.backend not in (None, "auto"):
            return self.backend
        installed = (b for b in AUTO_ORDER if backend_installed(b) and backend_runs(b, self.embedded))
        return next(installed, "torch" if backend_runs("torch", self.embedded) else "llama_cpp")

    @property
    def server_slots(self) -> int:
        """Requests one embedded server takes at once."""
        if self.embedded is None or self.embedded_backend != "torch":
            return 1
        return self.max_batch or TORCH_MAX_BATCH

    @property
    def deadline(self) -> float:
        return self.deadline_s or DEADLINE_S

    @property
    def silence_limit(self) -> float:
        return self.silence_limit_s or SILENCE_LIMIT_S

    @property
    def reply_limit(self) -> int:
        return self.max_reply_bytes or MAX_REPLY_BYTES

    def api_key(self) -> str | None:
        """The key from the environment (never stored); None for endpoints that need none."""
        if self.embedded is not None:
            return None
        return os.environ.get(self.api_key_env or "OPENAI_API_KEY")


class ModelRef(StrictModel):
    endpoint: str
    model: str
    temperature: float = Field(default=0.0, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int = Field(default=512, ge=1)

    def request(
        self, messages: Sequence[tuple[str, str]], *, stage: str, tag: str, **fields: Unpack[RequestFields]
    ) -> ChatRequest:
        """A request to this model with its settings (temperature, top_p, max_tokens); ``fields`` say the rest
        (a reply schema, a seed, stops) or a max_tokens of the request's own."""
        fields.setdefault("max_tokens", self.max_tokens)
        return ChatRequest(
            self.endpoint,
            self.model,
            tuple(messages),
            temperature=self.temperature,
            top_p=self.top_p,
            stage=stage,
            tag=tag,
            **fields,
        )
