"""``llm/tokens.py``: the dry run's exact prompt counts for an embedded model, by llama.cpp's vocabulary-only
model or by the torch backend's own tokenizer and chat template."""

from __future__ import annotations

import sys

import pytest

from rmb_build.llm import tokens
from rmb_build.llm.config import EndpointConfig
from rmb_build.llm.planning import PlanningClient
from rmb_build.llm.types import ChatRequest

REQUESTS = [
    ChatRequest("local", "smollm2", (("user", "Say hi."),), max_tokens=4),
    ChatRequest(
        "local", "smollm2", (("system", "Be brief."), ("user", "Rate 'Paris is in France' 1-10.")), max_tokens=4
    ),
    ChatRequest(
        "local",
        "smollm2",
        (
            ("user", "Explain TCP."),
            ("assistant", "A protocol."),
            ("user", "Más, s'il vous plaît 🙂 — <b>ok</b>\n\n  x"),
        ),
        max_tokens=4,
    ),
]


@pytest.fixture
def fresh_counters():
    """The counters are cached per model for a process: each test builds its own, and leaves none behind."""
    counters = [getattr(tokens, name) for name in ("_torch_counter", "_gguf_counter") if hasattr(tokens, name)]
    for counter in counters:
        counter.cache_clear()
    yield
    for counter in counters:
        counter.cache_clear()


@pytest.mark.slow  # transformers' import and a tokenizer read: 5-20 s on 2 busy cores
def test_without_llama_cpp_the_dry_run_counts_exactly_with_the_torch_backends_tokenizer(monkeypatch, fresh_counters):
    """Issue 49: on a torch-only install (the build extra compiles nothing, so a newcomer has no llama_cpp) the
    dry run fell back to 'about 4 characters a token'; it now counts with the torch server's own tokenizer."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` fails; find_spec finds nothing
    endpoint = EndpointConfig(embedded="smollm2")
    assert endpoint.embedded_backend == "torch"
    assert tokens._gguf_counter("smollm2") is None  # llama.cpp is really out of reach here
    count, method = PlanningClient({"local": endpoint})._prompt_counter("local")
    assert method.startswith("exact"), method
    assert count is tokens._torch_counter("smollm2")
    assert all(count(r) > 10 for r in REQUESTS)  # the template's own tokens (roles, markers) counted


@pytest.mark.slow
def test_the_torch_and_llama_cpp_counters_give_the_same_counts(fresh_counters):
    """Where both backends are installed, each counts with its own tokenizer and chat template, and they agree;
    an endpoint counts with the backend that serves it."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("transformers")
    by_torch, by_llama = tokens._torch_counter("smollm2"), tokens._gguf_counter("smollm2")
    assert by_torch is not None and by_llama is not None
    assert [by_torch(r) for r in REQUESTS] == [by_llama(r) for r in REQUESTS]
    assert tokens.exact_counter(EndpointConfig(embedded="smollm2", backend="torch")) is by_torch
    assert tokens.exact_counter(EndpointConfig(embedded="smollm2", backend="llama_cpp")) is by_llama
