"""Shared by the transformers-based adapters (``hf:``, ``dpo:``): where a model is, device and dtype, the
tokenizer and its chat template, model identity for fingerprints, and token-length-sorted batches.

A model name is a local folder or a Hub id. A Hub id is read from the local Hugging Face cache when
it is there (no network call); otherwise, offline (``HF_HUB_OFFLINE=1``, or the Hub unreachable
within a few seconds) it fails at once with one line instead of retrying.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.extras import install_line
from rmb_build.core.hub import hub_offline, hub_reachable, is_hub_id
from rmb_build.core.items import Conversation
from rmb_build.evaluate.rm_options import RMOptions

if TYPE_CHECKING:
    from transformers import BitsAndBytesConfig, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class ModelRef:
    """Where a model is: ``path`` for from_pretrained (a folder, or the Hub id when read online)."""

    name: str
    path: str
    commit: str | None = None  # a Hub snapshot's commit, when read from the local cache

    @property
    def online(self) -> bool:
        return self.path == self.name and not Path(self.path).is_dir()


def check_model_name(name: str) -> None:
    """RMBError unless ``name`` is a local folder or has a Hub id's form."""
    path = Path(name).expanduser()
    if not path.is_dir() and not is_hub_id(name, org=False):
        raise RMBError(f"model {name!r}: no such folder: {path}")


def locate(name: str, options: RMOptions) -> ModelRef:
    """A local folder, the Hub id's snapshot in the local cache, or (online only) the Hub id itself."""
    path = Path(name).expanduser()
    if path.is_dir():
        return ModelRef(name, str(path))
    check_model_name(name)
    from huggingface_hub import snapshot_download

    try:
        snap = snapshot_download(name, revision=options.revision, local_files_only=True)
        return ModelRef(name, snap, Path(snap).name)
    except Exception:  # not cached (or not at this revision): go online if we may
        pass
    where = f"{name}@{options.revision}" if options.revision else name
    if hub_offline():
        raise RMBError(
            f"model {where!r}: not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 forbids "
            "downloading it (download it first, or give a local folder)"
        )
    if not hub_reachable():
        raise RMBError(
            f"model {where!r}: not in the local Hugging Face cache, and the Hub cannot be reached "
            f"(offline?): download it first, or give a local folder"
        )
    return ModelRef(name, name)


def load_kwargs(ref: ModelRef, options: RMOptions, model: bool = True) -> dict[str, Any]:
    """from_pretrained's arguments from the command line's options."""
    kw: dict[str, Any] = {"trust_remote_code": options.trust_remote_code}
    if ref.online and options.revision:
        kw["revision"] = options.revision
    attn = attention(options, resolve_device(options)) if model else None
    if attn:
        kw["attn_implementation"] = attn
    if model and options.device_map:
        kw.update(_spread(options))
    if model and options.load_in:
        kw["quantization_config"] = _quantization(options.load_in)
    return kw


def attention(options: RMOptions, device: str) -> str | None:
    """The attention implementation a model loads with: ``--attn-implementation``, else ``eager`` on a CPU (None:
    transformers' default). On a CPU, torch's fused attention rounds with the batch's padded width (a text's
    fp32 score moved by up to 1e-7 between batch sizes); eager attention's does not, so a score is the same at
    any batch size. Its cost: it holds each layer's full attention matrix, batch x heads x width x width."""
    if options.attn_implementation:
        return options.attn_implementation
    return "eager" if device.startswith("cpu") else None


def _spread(options: RMOptions) -> dict[str, Any]:
    """``device_map`` (accelerate places the layers over the GPUs and CPU memory, then disk) and its limits."""
    try:
        import accelerate  # noqa: F401
    except ImportError:
        raise RMBError(f"--device-map needs the accelerate package: {install_line('big')}") from None
    import tempfile

    kw: dict[str, Any] = {"device_map": options.device_map, "offload_folder": tempfile.mkdtemp(prefix="rmb-offload-")}
    if options.max_memory:
        kw["max_memory"] = dict(options.max_memory)
    return kw


def _quantization(bits: str) -> BitsAndBytesConfig:
    """bitsandbytes' 8- or 4-bit loading, which runs on CUDA only."""
    import torch

    if not torch.cuda.is_available():
        raise RMBError(
            f"--load-in {bits} quantizes with bitsandbytes, which needs a CUDA device; none is present "
            "(leave it out to load the model unquantized)"
        )
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError:
        raise RMBError(f"--load-in {bits} needs the bitsandbytes package: {install_line('big')}") from None
    return BitsAndBytesConfig(load_in_8bit=bits == "8bit", load_in_4bit=bits == "4bit")


def place(model: PreTrainedModel, options: RMOptions, device: str) -> PreTrainedModel:
    """``model`` on ``device`` in eval mode; a model accelerate spread or bitsandbytes quantized stays where
    it was put."""
    if options.device_map or options.load_in:
        return model.eval()
    return model.to(device).eval()  # type: ignore[arg-type]  # transformers' wrapper of ``to`` is typed as taking the model


def input_device(model: PreTrainedModel, options: RMOptions, device: str) -> str:
    """Where a batch goes: the device of the model's first layers when it is spread, else ``device``."""
    if options.device_map or options.load_in:
        return str(getattr(model, "device", device))
    return device


def load_error(ref: ModelRef, what: str, exc: Exception) -> RMBError:
    """One line for a model or tokenizer that transformers could not load."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "trust_remote_code" in str(exc):
        msg = "it ships its own code; add --trust-remote-code to run it"
    return RMBError(f"model {ref.name!r}: cannot load {what}: {msg}")


def load_checked(auto_class, ref: ModelRef, options: RMOptions, what: str, **kwargs):
    """``auto_class.from_pretrained`` that refuses a model any of whose parameters the checkpoint did not hold.

    transformers fills a parameter missing from the checkpoint (a sequence-classification head on a
    causal LM checkpoint, an LM head on a classifier's) with random values and only logs it; scoring
    with it gives a plausible-looking, meaningless number. Buffers (rotary ``inv_freq``, ``position_ids``)
    do not count, nor do weights tied to a loaded one.
    """
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report would precede our one line; we read the same info
    try:
        model, info = auto_class.from_pretrained(
            ref.path, output_loading_info=True, **kwargs, **load_kwargs(ref, options)
        )
    except (OSError, ValueError, ImportError) as exc:
        raise load_error(ref, f"it as {what}", exc) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    fresh = uninitialised_parameters(model, info)
    if fresh:
        shown = ", ".join(fresh[:6]) + (f" and {len(fresh) - 6} more" if len(fresh) > 6 else "")
        raise RMBError(
            f"model {ref.name!r}: loaded as {what}, {len(fresh)} parameter(s) are not in its checkpoint "
            f"and would be randomly initialised: {shown}; it needs another loader (see 'rmb evaluate "
            "--help' for the reward-model kinds), nothing was scored"
        )
    return model


def uninitialised_parameters(model, info: dict[str, Any]) -> list[str]:
    """Names of ``model``'s parameters that loading left at their random initial values, sorted."""
    params = dict(model.named_parameters())  # one name per tied tensor: a tied copy is not "missing"
    names = set(info.get("missing_keys") or ())
    names |= {m[0] if isinstance(m, (tuple, list)) else m for m in info.get("mismatched_keys") or ()}
    return sorted(n for n in names if n in params)


def resolve_device(options: RMOptions) -> str:
    if options.device:
        return options.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(options: RMOptions, device: str) -> str:
    """``bf16``, ``fp16`` or ``fp32``; ``auto`` is bf16 on a GPU and fp32 elsewhere."""
    if options.dtype == "auto":
        return "bf16" if device.startswith("cuda") else "fp32"
    return options.dtype


def torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def _file_digest(path: Path) -> str:
    """sha256 of a file's size, first and last MiB: cheap for multi-GB weights, and any re-save changes it."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        h.update(fh.read(1 << 20))
        if size > 2 << 20:
            fh.seek(-(1 << 20), os.SEEK_END)
            h.update(fh.read())
    return h.hexdigest()


def model_identity(ref: ModelRef, options: RMOptions) -> dict[str, Any]:
    """What identifies a model's weights: file digests for a local folder, the commit for a Hub id."""
    if ref.commit:
        return {"hub": ref.name, "commit": ref.commit}
    if not ref.online:
        path = Path(ref.path)
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and (p.suffix in WEIGHT_SUFFIXES or p.name == "config.json")
        )
        if not files:
            raise RMBError(f"model {ref.name!r}: the folder holds no config.json or weights")
        return {"files": {p.relative_to(path).as_posix(): _file_digest(p) for p in files}}
    try:
        from huggingface_hub import HfApi

        return {"hub": ref.name, "commit": HfApi().model_info(ref.name, revision=options.revision).sha}
    except Exception as exc:  # a typo, a private repo, an unknown revision
        raise RMBError(
            f"model {ref.name!r}: the Hub cannot resolve it ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None


def load_tokenizer(ref: ModelRef, options: RMOptions):
    """The model's tokenizer with a chat template (``--chat-template`` wins); right padding (its own side kept as
    ``rmb_own_padding_side``)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(ref.path, **load_kwargs(ref, options, model=False))
    except (OSError, ValueError) as exc:
        raise load_error(ref, "its tokenizer", exc) from None
    chat_template = options.chat_template
    if chat_template:
        path = Path(chat_template)
        tok.chat_template = path.read_text(encoding="utf-8") if path.is_file() else chat_template
    if not tok.chat_template:
        raise RMBError(
            f"model {ref.name!r}: its tokenizer has no chat template; give one with --chat-template "
            "(a Jinja string or a file)"
        )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    tok.rmb_own_padding_side = tok.padding_side  # what a harness that pads on the tokenizer's side does
    tok.padding_side = "right"
    return tok


def load_config(ref: ModelRef, options: RMOptions):
    """The model's config alone (no weights): what its own limit is read from."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(ref.path, **load_kwargs(ref, options, model=False))
    except (OSError, ValueError) as exc:
        raise load_error(ref, "its config", exc) from None


def template_hash(tok) -> str:
    return hashlib.sha256(str(tok.chat_template).encode("utf-8")).hexdigest()[:16]


def messages(conversation: Conversation, answer: str | None = None) -> list[dict[str, str]]:
    out = [t.to_message() for t in conversation]
    if answer is not None:
        out.append({"role": "assistant", "content": answer})
    return out


def render(tok, conversation: Conversation, answer: str) -> str:
    """The text a reward model reads: the conversation and the answer through the chat template."""
    return tok.apply_chat_template(messages(conversation, answer), tokenize=False)


def max_positions(config: PretrainedConfig, tok: PreTrainedTokenizerBase) -> int | None:
    limits = [getattr(config, "max_position_embeddings", None), getattr(tok, "model_max_length", None)]
    known = [int(x) for x in limits if isinstance(x, int) and 0 < x < 1_000_000]
    return min(known) if known else None


def truncate_left(ids: list[int], max_length: int | None) -> tuple[list[int], bool]:
    """Keep the last ``max_length`` tokens: the answer's end, where a reward model reads its score."""
    if max_length is None or len(ids) <= max_length:
        return ids, False
    return ids[-max_length:], True


def batch_size(options: RMOptions) -> int:
    """Texts per forward pass: ``--batch-size``, or 1 under ``--deterministic`` (each text alone, unpadded)."""
    return 1 if options.deterministic else max(1, options.batch_size)


def deterministic_kernels() -> None:
    """torch's deterministic algorithms (and cuBLAS's fixed workspace, set before CUDA starts), for
    ``--deterministic``."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


def batch_check(
    batched: Sequence[float], alone: Sequence[float], options: RMOptions, dtype: str, device: str
) -> dict[str, Any]:
    """results.json's ``scoring.batch_check``: how far texts scored in batches moved from the same texts scored
    alone (re-scored after the run), with the dtype, device and batch size that made them."""
    diffs = [abs(a - b) for a, b in zip(batched, alone)]
    return {
        "rescored": len(diffs),
        "batch_size": batch_size(options),
        "dtype": dtype,
        "device": device,
        "differ": sum(d > 0 for d in diffs),
        "max_abs_diff": max(diffs, default=0.0),
        "mean_abs_diff": sum(diffs) / len(diffs) if diffs else 0.0,
    }


def check_sample(n_texts: int, size: int = 8) -> list[int]:
    """Indices of up to ``size`` texts spread evenly over ``n_texts``: the re-scored sample of ``batch_check``."""
    step = max(1, n_texts // size)
    return list(range(0, n_texts, step))[:size]


def sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Index batches of similar length (longest first, so an out-of-memory error comes early)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), max(1, batch_size)):
        yield order[start : start + batch_size]


def share_batches(batches: Sequence[list[int]], lengths: Sequence[int], k: int, n: int) -> list[list[int]]:
    """The ``k``-th of ``n`` replicas' batches: the costliest batch (padded tokens) first, each to the replica
    with the least work so far (the lowest index on a tie); every replica computes the same split."""
    load = [0] * n
    mine = set()
    cost = lambda b: len(b) * max(lengths[i] for i in b)  # noqa: E731
    for j in sorted(range(len(batches)), key=lambda j: -cost(batches[j])):
        r = min(range(n), key=lambda r: load[r])
        load[r] += cost(batches[j])
        if r == k:
            mine.add(j)
    return [b for j, b in enumerate(batches) if j in mine]


def pad(batch: Sequence[Sequence[int]], pad_id: int, device: str):
    """Right-padded ``input_ids`` and ``attention_mask`` tensors."""
    import torch

    width = max(len(ids) for ids in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, ids in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[row, : len(ids)] = 1
    return input_ids.to(device), mask.to(device)


def describe_common(tok, options: RMOptions, device: str) -> dict[str, Any]:
    """The options that change scores; the loading flags only when set (earlier fingerprints stay valid)."""
    out: dict[str, Any] = {
        "dtype": resolve_dtype(options, device),
        "max_length": options.max_length,
        "chat_template": template_hash(tok),
    }
    if options.trust_remote_code:
        out["trust_remote_code"] = True
    if options.revision:
        out["revision"] = options.revision
    attn = attention(options, device)
    if attn:
        out["attn_implementation"] = attn
    if options.load_in:  # quantized weights give other scores; where the layers sit does not
        out["load_in"] = options.load_in
    if options.deterministic:  # each text alone: in bf16 on a GPU not the batched scores, so not their cache
        out["deterministic"] = True
    return out
