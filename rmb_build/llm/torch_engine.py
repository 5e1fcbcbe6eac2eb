"""The embedded model on torch and transformers: one decode loop over a dynamic batch of requests.

The GGUF file is dequantised by transformers (the ``gguf`` package) once and kept as safetensors in the model
cache (``prepared``), so a later start loads in a second instead of a minute. ``BatchEngine`` admits requests
between decode steps: each new one is prefilled alone (its prompt's numbers are those of a lone request), its
KV cache is left-padded into the batch's, and every step decodes one token for every row. Each row has its own
sampling (argmax at temperature 0; a generator seeded by the request's seed otherwise), its own stop strings and
token limit, and, for a JSON schema, its own grammar (llguidance): the token mask allows only tokens that keep
the reply a prefix of a schema-valid value, so a reply that ends (not cut by ``max_tokens``) parses.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, cast

from rmb_build.llm.config import TORCH_LOAD_S, TORCH_MAX_BATCH, TORCH_STARTUP_S

if TYPE_CHECKING:
    import torch
    from llguidance import LLMatcher, LLTokenizer
    from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase
    from transformers.cache_utils import DynamicLayer

log = logging.getLogger(__name__)

# a temperature this small samples as argmax does (logits / 1e-37 overflow, and the softmax is NaN)
GREEDY_BELOW = 1e-5


class EngineError(ValueError):
    """A request the engine cannot run (its prompt too long, its schema not compilable): a 400 reply."""


def _content_tag(gguf: Path) -> str:
    """The GGUF file's identity by content (its size, first and last 4 MiB) and the transformers that
    dequantises it: the same model installed in two venvs shares one prepared folder."""
    digest = hashlib.sha256(f"{gguf.stat().st_size}|{metadata.version('transformers')}".encode())
    with gguf.open("rb") as fh:
        digest.update(fh.read(4 << 20))
        fh.seek(max(0, gguf.stat().st_size - (4 << 20)))
        digest.update(fh.read())
    return digest.hexdigest()[:16]


# how long ``prepared`` waits for another process preparing the same model, unless told: what a server's startup leaves
PREPARE_WAIT_S = TORCH_STARTUP_S - TORCH_LOAD_S


def prepared_folder(gguf: Path, cache_dir: Path) -> Path:
    """Where ``prepared`` keeps ``gguf``'s transformers folder (it may not exist yet)."""
    return cache_dir / f"{gguf.stem}.torch-{_content_tag(gguf)}"


def prepared(gguf: Path, cache_dir: Path, wait_s: float = PREPARE_WAIT_S) -> Path:
    """A transformers folder (safetensors, config, tokenizer) for ``gguf``, dequantised on first use.

    Keyed by the file's content (``_content_tag``) and written whole or not at all (``atomic.write_once``): a
    second server preparing the same model meanwhile waits up to ``wait_s`` seconds for the first's folder
    (a warning says so as the wait begins); a wait run out or a cache folder that cannot be written is an
    EngineError naming it.
    """
    from rmb_build.core.atomic import write_once
    from rmb_build.core.errors import RMBError

    out = prepared_folder(gguf, cache_dir)
    if (out / "config.json").is_file():
        return out
    try:
        return write_once(
            out,
            lambda folder: _dequantise(gguf, folder),
            flag="the model cache",
            wait_s=wait_s,
            on_wait=lambda holder: log.warning("waiting up to %.0fs for %s, being prepared by %s", wait_s, out, holder),
        )
    except RMBError as exc:
        raise EngineError(str(exc)) from None


def _dequantise(gguf: Path, folder: Path) -> None:
    """``gguf``'s weights as float32 safetensors, its config and tokenizer, saved into ``folder``."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = gguf_tokenizer(gguf)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # the weights are dequantised: plain float32 tensors, saved as such (an attribute the stubs do not declare)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def gguf_tokenizer(gguf: Path) -> PreTrainedTokenizerBase:
    """The tokenizer and chat template the GGUF file carries, as transformers reads them (no weights)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def served_tokenizer(gguf: Path, cache_dir: Path) -> PreTrainedTokenizerBase:
    """The tokenizer a torch server of ``gguf`` uses, without preparing its weights: the prepared folder's where
    it exists, else the same one read from the GGUF file (what ``prepared`` saves), kept in a tokenizer-only folder
    beside (reading it from the GGUF file takes 5-10 s, from a folder half a second)."""
    from transformers import AutoTokenizer

    from rmb_build.core.atomic import write_once
    from rmb_build.core.errors import RMBError

    folder = prepared_folder(gguf, cache_dir)
    if (folder / "config.json").is_file():
        return AutoTokenizer.from_pretrained(folder)
    tokenizer = folder.with_name(folder.name.replace(".torch-", ".tokenizer-"))
    try:
        write_once(tokenizer, lambda f: gguf_tokenizer(gguf).save_pretrained(f), flag="the model cache", wait_s=60)
    except RMBError:  # an unwritable cache: read from the GGUF file every time
        return gguf_tokenizer(gguf)
    return AutoTokenizer.from_pretrained(tokenizer)


def chat_prompt_tokens(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> list[int]:
    """The chat template applied to ``messages``, ready for the assistant's turn: the prompt a torch server
    decodes (its ``usage.prompt_tokens`` is this list's length)."""
    if not getattr(tokenizer, "chat_template", None):
        raise EngineError("the model has no chat template")
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    if not isinstance(ids, Mapping):
        raise EngineError(f"the chat template gave {type(ids).__name__}, not the tokens")
    return [int(t) for t in ids["input_ids"]]


def load(folder: Path, threads: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model (float32, eval) and tokenizer of a ``prepared`` folder, torch on ``threads`` threads."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, tokenizer


@dataclass
class Sampling:
    """How a request picks its tokens."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    stop: Sequence[str] = ()
    schema: dict[str, object] | None = None  # a JSON schema the reply must follow
    top_logprobs: int | None = None  # None: no logprobs


@dataclass
class TokenLogprob:
    token: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class Row:
    """One request in the engine: its prompt, how it samples, and what it has produced so far."""

    prompt: list[int]
    sampling: Sampling
    tokens: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None  # "stop" (ended, a stop string or the grammar's end) or "length"
    error: str | None = None
    first_token_s: float | None = None
    done: threading.Event = field(default_factory=threading.Event)
    matcher: LLMatcher | None = None
    generator: torch.Generator | None = None
    pos: int = 0  # tokens of this row in the KV cache
    pending: int = -1  # the token sampled last, not yet in the cache
    cancelled: bool = False  # its client is gone: dropped before the next step (``BatchEngine.cancel``)


class BatchEngine:
    """The decode loop (``run`` in its own thread); ``submit`` a Row from any thread and ``wait`` on it."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        n_ctx: int,
        max_batch: int = TORCH_MAX_BATCH,
    ):
        self.model, self.tokenizer, self.n_ctx = model, tokenizer, n_ctx
        self.vocab = int(model.config.get_text_config().vocab_size)
        eos = model.generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [eos]
        eos_ids.append(tokenizer.eos_token_id)
        self.eos = {int(e) for e in eos_ids if e is not None}
        self.max_batch = max_batch if _mergeable(model) else 1
        # transformers renamed the argument (``past_key_values`` is deprecated from 5.2x)
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._queue: queue.Queue[Row] = queue.Queue()
        self._ll_tokenizer: LLTokenizer | None = None
        self._bit_shifts = torch_arange(32)
        self._stopped = False
        self.decoding = 0  # rows in the batch now (the loop's thread writes it; /health reads it)
        self.dropped = 0  # rows dropped because their client was gone

    # ---- requests ------------------------------------------------------------------------------

    def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat template applied to ``messages``, ready for the assistant's turn (``chat_prompt_tokens``)."""
        return chat_prompt_tokens(self.tokenizer, messages)

    def matcher(self, schema: dict[str, object]) -> LLMatcher:
        """A grammar matcher for ``schema`` (compact JSON: no free whitespace for a small model to loop in)."""
        import llguidance
        import llguidance.hf

        if self._ll_tokenizer is None:
            # a fast tokenizer (TokenizersBackend): transformers 5 loads the GGUF's as one; the stubs type its base
            self._ll_tokenizer = llguidance.hf.from_tokenizer(self.tokenizer, n_vocab=self.vocab)  # type: ignore[arg-type]
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, overrides={"whitespace_flexible": False})
        except (ValueError, TypeError, RuntimeError) as exc:
            raise EngineError(f"the JSON schema cannot be compiled: {exc}") from None
        matcher = llguidance.LLMatcher(self._ll_tokenizer, grammar)
        if matcher.is_error():
            raise EngineError(f"the JSON schema cannot be compiled: {matcher.get_error()}")
        return matcher

    def row(self, prompt: list[int], sampling: Sampling) -> Row:
        """A Row for ``prompt``, checked against the context (raises EngineError)."""
        import torch

        if len(prompt) >= self.n_ctx:
            raise EngineError(f"the prompt has {len(prompt)} tokens; the context holds {self.n_ctx}")
        row = Row(prompt, sampling)
        if sampling.schema is not None:
            row.matcher = self.matcher(sampling.schema)
        if sampling.temperature > 0:
            row.generator = torch.Generator()
            seed = sampling.seed if sampling.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
            row.generator.manual_seed(seed % 2**63)  # torch's seeds are 64-bit; any integer a request sends is one
        return row

    def submit(self, row: Row) -> Row:
        if self._stopped:
            raise RuntimeError("the engine is stopped")
        self._queue.put(row)
        return row

    def cancel(self, row: Row) -> None:
        """Drop ``row`` (its client is gone): out of the queue or the batch before the next step, its slot free."""
        row.cancelled = True  # a loop blocked waiting has no row, queued or decoding, to drop: nothing to wake

    def waiting(self) -> int:
        return self._queue.qsize()

    def stop(self) -> None:
        self._stopped = True
        self._queue.put(Row([], Sampling(0)))  # wakes the loop

    # ---- the loop -------------------------------------------------------------------------------

    def run(self) -> None:
        """Decode until ``stop``: admit waiting rows between steps, one token for every row each step."""
        import torch

        active: list[Row] = []
        batch: _BatchCache | None = None
        with torch.inference_mode():
            while not self._stopped:
                for row in self._admit(block=not active, room=self.max_batch - len(active)):
                    cache = self._prefill(row)
                    if cache is None:
                        continue
                    try:
                        batch = _BatchCache.single(cache, row.pos) if batch is None else batch.merge(cache, row.pos)
                    except Exception as exc:  # this row fails; the batch before it goes on
                        log.exception("joining a row to the batch failed")
                        _fail(row, exc)
                        continue
                    active.append(row)
                if any(row.cancelled for row in active):
                    keep = [i for i, row in enumerate(active) if not self._drop_if_cancelled(row)]
                    active = [active[i] for i in keep]
                    batch = batch.select(keep) if keep and batch is not None else None
                self.decoding = len(active)
                if not active:
                    continue
                assert batch is not None
                try:
                    logits = self._decode(active, batch)
                    keep = [i for i, row in enumerate(active) if not self._choose_or_fail(row, logits[i])]
                except Exception as exc:  # the step's rows fail with it; the loop goes on for the next ones
                    log.exception("decode step failed")
                    for row in active:
                        if not row.done.is_set():
                            row.error = f"{type(exc).__name__}: {exc}"
                            row.done.set()
                    active, batch = [], None
                    continue
                if len(keep) < len(active):
                    active = [active[i] for i in keep]
                    batch = batch.select(keep) if keep else None
                    self.decoding = len(active)
            self.decoding = 0

    def _drop_if_cancelled(self, row: Row) -> bool:
        if not row.cancelled:
            return False
        self.dropped += 1
        row.error = "cancelled: the client is gone"
        row.done.set()
        return True

    def _choose_or_fail(self, row: Row, logits: torch.Tensor) -> bool:
        """``_choose``, a row's own failure (its sampling, its grammar) ending that row alone."""
        try:
            return self._choose(row, logits)
        except Exception as exc:
            log.exception("choosing a row's next token failed")
            _fail(row, exc)
            return True

    def _admit(self, *, block: bool, room: int) -> list[Row]:
        rows: list[Row] = []
        try:
            if block:
                rows.append(self._queue.get())
            while len(rows) < room:
                rows.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        # the empty row only wakes the loop; a row whose client left while it waited is dropped here
        return [r for r in rows if r.prompt and not self._drop_if_cancelled(r)]

    def _prefill(self, row: Row) -> DynamicCache | None:
        """Run ``row``'s prompt alone and pick its first token; its KV cache, or None when it is done already."""
        from transformers import DynamicCache

        start = time.perf_counter()
        try:
            cache = DynamicCache(config=self.model.config)
            ids = self._tensor([row.prompt])
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self._cache_arg: cache})
            row.pos = len(row.prompt)
            finished = self._choose(row, out.logits[0, -1])
        except Exception as exc:  # a request's failure is its own reply, never the loop's end
            log.exception("prefill failed")
            row.error = f"{type(exc).__name__}: {exc}"
            row.done.set()
            return None
        row.first_token_s = time.perf_counter() - start
        return None if finished else cache

    def _decode(self, active: list[Row], batch: _BatchCache) -> torch.Tensor:
        import torch

        ids = self._tensor([[r.pending] for r in active])
        positions = self._tensor([[r.pos] for r in active])
        mask = torch.cat([batch.mask, torch.ones((len(active), 1), dtype=batch.mask.dtype)], dim=1)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **{self._cache_arg: batch.cache}
        )
        batch.mask = mask
        for r in active:
            r.pos += 1
        return out.logits[:, -1]

    def _tensor(self, rows: list[list[int]]) -> torch.Tensor:
        import torch

        return torch.tensor(rows, dtype=torch.long)

    def _choose(self, row: Row, logits: torch.Tensor) -> bool:
        """Pick ``row``'s next token from ``logits`` (one row); True when the row is finished (and answered)."""
        import torch

        logits = logits.float()
        if row.sampling.top_logprobs is not None:
            raw = torch.log_softmax(logits, dim=-1)
        if row.matcher is not None:
            import llguidance.torch as lt

            mask = lt.allocate_token_bitmask(1, self.vocab)
            lt.fill_next_token_bitmask(row.matcher, mask, 0)
            # the bits unpacked here: llguidance's own apply compiles a kernel on first use (10 s on 2 busy cores)
            allowed = ((mask[0].unsqueeze(-1) >> self._bit_shifts) & 1).flatten()[: logits.shape[0]].bool()
            logits = logits.masked_fill(~allowed, float("-inf"))
        token = _sample(logits, row.sampling, row.generator)
        if row.sampling.top_logprobs is not None:
            k = row.sampling.top_logprobs
            top = torch.topk(raw, k) if k > 0 else None
            row.logprobs.append(
                TokenLogprob(
                    token,
                    float(raw[token]),
                    [] if top is None else [(int(i), float(v)) for v, i in zip(top.values, top.indices)],
                )
            )
        return self._extend(row, token)

    def _extend(self, row: Row, token: int) -> bool:
        ended = token in self.eos
        if row.matcher is not None:
            if not row.matcher.consume_token(token):
                row.error = f"the grammar refused token {token}: {row.matcher.get_error()}"
                return self._finish(row, None)
            ended = ended or row.matcher.is_stopped()
        if token in self.eos:
            return self._finish(row, "stop")
        row.tokens.append(token)
        row.pending = token
        row.text = str(self.tokenizer.decode(row.tokens, skip_special_tokens=True))
        for s in row.sampling.stop:
            at = row.text.find(s) if s else -1
            if at >= 0:
                row.text = row.text[:at]
                return self._finish(row, "stop")
        if ended:
            return self._finish(row, "stop")
        if len(row.tokens) >= row.sampling.max_tokens or row.pos + 1 >= self.n_ctx:
            return self._finish(row, "length")
        return False

    def _finish(self, row: Row, reason: str | None) -> bool:
        row.finish_reason = reason
        row.done.set()
        return True


def _fail(row: Row, exc: BaseException) -> None:
    if not row.done.is_set():
        row.error = f"{type(exc).__name__}: {exc}"
        row.done.set()


def torch_arange(n: int) -> torch.Tensor:
    import torch

    return torch.arange(n, dtype=torch.int32)


def _sample(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    import torch

    if sampling.temperature < GREEDY_BELOW or generator is None:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.double() / sampling.temperature, dim=-1)
    if sampling.top_p is not None and sampling.top_p < 1:
        sorted_p, order = torch.sort(probs, descending=True)
        outside = torch.cumsum(sorted_p, dim=-1) - sorted_p > sampling.top_p  # keeps the token that crosses top_p
        sorted_p[outside] = 0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_p)
    return int(torch.multinomial(probs, 1, generator=generator))


def _mergeable(model: PreTrainedModel) -> bool:
    """Whether rows' KV caches can be padded and stacked: every layer a plain full-attention cache."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)


class _BatchCache:
    """The batch's KV cache, rows left-padded to one length, and which of its positions are real (``mask``)."""

    def __init__(self, cache: DynamicCache, mask: torch.Tensor):
        self.cache = cache
        self.mask = mask

    @classmethod
    def single(cls, cache: DynamicCache, length: int) -> _BatchCache:
        import torch

        return cls(cache, torch.ones((1, length), dtype=torch.long))

    def _layers(self, cache: DynamicCache | None = None) -> list[DynamicLayer]:
        return [cast("DynamicLayer", layer) for layer in (cache if cache is not None else self.cache).layers]

    def merge(self, cache: DynamicCache, length: int) -> _BatchCache:
        """This batch with one more row (its cache of ``length`` positions), both padded on the left."""
        import torch
        import torch.nn.functional as F

        width = self.mask.shape[1]
        total = max(width, length)
        for mine, theirs in zip(self._layers(), self._layers(cache)):
            for name in ("keys", "values"):
                a, b = getattr(mine, name), getattr(theirs, name)
                a = F.pad(a, (0, 0, total - width, 0))
                b = F.pad(b, (0, 0, total - length, 0))
                setattr(mine, name, torch.cat([a, b], dim=0))
        row = torch.cat([torch.zeros(total - length, dtype=torch.long), torch.ones(length, dtype=torch.long)])
        self.mask = torch.cat([F.pad(self.mask, (total - width, 0)), row.unsqueeze(0)], dim=0)
        return self

    def select(self, keep: list[int]) -> _BatchCache:
        """Only the rows ``keep``; positions that are padding in every row left dropped."""
        import torch

        idx = torch.tensor(keep, dtype=torch.long)
        mask = self.mask.index_select(0, idx)
        first = int(torch.nonzero(mask.any(dim=0))[0])
        for layer in self._layers():
            for name in ("keys", "values"):
                setattr(layer, name, getattr(layer, name).index_select(0, idx)[:, :, first:, :])
        self.mask = mask[:, first:]
        return self
