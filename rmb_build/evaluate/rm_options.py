"""What a reward-model adapter is told (``RMOptions``): each option once, with its type, default, allowed
values, validation and help text. ``rmb evaluate``'s flags (``add_flags``, read back by ``from_args``), the
downstream config's per-RM keys (``config_fields``) and the Python API (``RMOptions(...)``, which validates
itself) are all made from this one definition.

Run-level fields stay out of the per-RM config (``per_rm=False``): ``endpoints`` (the named endpoints
``openai:<model>@<name>`` may name: the run's own, from its build or downstream config; ``config``, a config
whose ``endpoints`` are read into it, is kept for callers that hand one), ``llm_cache_dir`` (the run's cache),
``shard`` (set on each replica by ``evaluate.devices``, never by a user) and ``extra`` (the API's free-form channel).
``seed`` is per RM, but ``rmb evaluate --seed`` also seeds the intervals, so that command defines its flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, cast, runtime_checkable

from rmb_build.core.errors import RMBError

if TYPE_CHECKING:
    from rmb_build.llm.config import EndpointConfig

_FIELD_DEFAULT = object()  # a flag's default is the field's


@dataclass(frozen=True)
class Option:
    """How one field of ``RMOptions`` is checked, read from text and shown as a flag."""

    help: str | None
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    metavar: str | None = None
    parse: Callable[[str], object] | None = None  # a flag's text (or a YAML string) to the value; ValueError: problem
    check: Callable[[Any], str | None] | None = None  # the problem with a value, or None
    flag: bool = True  # an ``rmb evaluate`` flag
    per_rm: bool = True  # a key of a downstream config's reward_models entry
    cli_default: object = _FIELD_DEFAULT  # the flag's default, where the command resolves a None itself

    def problem(self, value: Any) -> str | None:
        """What is wrong with a (typed) value, phrased to follow the option's name; None when nothing is."""
        if value is None:
            return None
        if self.choices is not None and value not in self.choices:
            return f"{value!r}: expected one of {', '.join(self.choices)}"
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum}"
        return self.check(value) if self.check else None


_T = TypeVar("_T")


def _option(default: _T, help: str | None, **kw: Any) -> _T:
    meta = {"option": Option(help, **kw)}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def _max_memory(text: str) -> dict[int | str, str] | None:
    """``0=70GiB,cpu=100GiB`` as from_pretrained's ``max_memory`` (GPU indices as ints); empty: None."""
    if not text:
        return None
    out: dict[int | str, str] = {}
    for part in text.split(","):
        dev, sep, size = part.partition("=")
        if not sep or not dev.strip() or not size.strip():
            raise ValueError(f"{text!r}: expected DEVICE=SIZE[,DEVICE=SIZE...], e.g. 0=70GiB,cpu=100GiB")
        dev = dev.strip()
        out[int(dev) if dev.isdigit() else dev] = size.strip()
    return out


def _gpu_indices(memory: dict[int | str, str]) -> str | None:
    quoted = [k for k in memory if isinstance(k, str) and k.strip().isdigit()]
    return f"{memory!r}: a GPU is its index as a number ({quoted[0]}, not {quoted[0]!r})" if quoted else None


def _devices(text: str) -> list[str]:
    """``auto`` (every CUDA device, or the CPU alone) or ``cpu,cpu`` / ``cuda:0,cuda:1`` as a list."""
    if text.strip() == "auto":
        import torch

        count = torch.cuda.device_count()
        return [f"cuda:{i}" for i in range(count)] if count else ["cpu"]
    devices = [d.strip() for d in text.split(",")]
    if not all(devices):
        raise ValueError(f"{text!r}: expected auto or a comma-separated list of devices, e.g. cuda:0,cuda:1")
    mixed = _mixed_kinds(devices)
    if mixed:
        raise ValueError(f"{text!r}: {mixed}")
    return devices


def _mixed_kinds(devices: list[str]) -> str | None:
    kinds = {d.split(":")[0] for d in devices}
    if len(kinds) > 1:  # a CPU's and a GPU's default dtypes differ: the replicas would score differently
        return f"mixes device kinds ({', '.join(sorted(kinds))}); give devices of one kind"
    return None


def _check_devices(devices: list[str]) -> str | None:
    mixed = _mixed_kinds(devices)
    return f"{','.join(devices)!r}: {mixed}" if mixed else None


def _known_protocol(name: str) -> str | None:
    from rmb_build.evaluate.protocols import PROTOCOLS

    return None if name in PROTOCOLS else f"{name!r}: unknown protocol (known: {', '.join(PROTOCOLS)})"


@runtime_checkable
class HasEndpoints(Protocol):
    """A config that names endpoints (a build or downstream config): what ``RMOptions.config`` is read for."""

    @property
    def endpoints(self) -> Mapping[str, EndpointConfig]: ...


@dataclass
class RMOptions:
    """Everything a run tells an adapter; each adapter reads what it needs. Built with a wrong value (a type, a
    choice, a minimum), it raises RMBError naming the field."""

    batch_size: int = _option(16, None, minimum=1)
    dtype: str = _option(
        "auto",
        "hf:/dpo: weights dtype (auto: the protocol's on a GPU, bf16 under native; fp32 on CPU)",
        choices=("auto", "bf16", "fp16", "fp32"),
    )
    max_length: int | None = _option(None, "hf:/dpo: tokens per text; longer texts are cut", minimum=8)
    chat_template: str | None = _option(None, "hf:/dpo: a Jinja chat template (string or file)")
    device: str | None = _option(None, "hf:/dpo: torch device (default: cuda when present)")
    trust_remote_code: bool = _option(
        False,
        "hf:/dpo: run the model's own code from its folder or Hub repo (needed by custom architectures)",
    )
    family: str | None = _option(
        None,
        "hf: the reward-model family, how the checkpoint is loaded and its reward read "
        "(default: sequence-classifier; see rmb_build.evaluate.families)",
        metavar="NAME",
    )
    device_map: str | None = _option(
        None,
        "hf: spread a model larger than one device over the GPUs, CPU memory and disk (accelerate)",
        choices=("auto",),
    )
    max_memory: dict[int | str, str] | None = _option(
        None,
        "hf: with --device-map, what each device may hold, e.g. 0=70GiB,cpu=100GiB",
        metavar="DEV=SIZE,...",
        parse=_max_memory,
        check=_gpu_indices,
    )
    load_in: str | None = _option(
        None, "hf: quantize the weights with bitsandbytes while loading (needs a CUDA device)", choices=("8bit", "4bit")
    )
    revision: str | None = _option(None, "hf:/dpo: Hub branch, tag or commit of the model")
    attn_implementation: str | None = _option(
        None, "hf:/dpo: transformers attention implementation (eager, sdpa, flash_attention_2, ...)", metavar="NAME"
    )
    protocol: str = _option(
        "native",
        "hf: the harness whose text preparation to copy (max length and side cut, special tokens and BOS, "
        "roles, GPU dtype, ties): native, rmb, rewardbench (the CLI), rewardbench-run_rm, rewardbench-v2, "
        "rm-bench (see docs/protocols.md); default: the release's authors' (rmb for an RMB release), native "
        "for a release of no known benchmark",
        metavar="NAME",
        check=_known_protocol,
        cli_default=None,
    )
    devices: list[str] | None = _option(
        None,
        "hf: one model replica per device, in its own process (auto: every CUDA device; or e.g. "
        "cuda:0,cuda:1); scores equal one device's",
        metavar="auto|LIST",
        parse=_devices,
        check=_check_devices,
    )
    deterministic: bool = _option(
        False,
        "hf:/dpo:/pairrm: score each text alone (no padding, no batch) with deterministic kernels, in a fixed "
        "order: a rerun gives the same scores bit for bit whatever the batch size, cache or devices (slower)",
    )
    votes: int = _option(1, "openai: samples per judgement (majority vote)", minimum=1)
    judge_mode: str = _option(
        "pairwise", "openai: compare two answers, or rate each answer alone", choices=("pairwise", "pointwise")
    )
    with_criteria: bool = _option(False, "openai: add the scenario's evaluation criteria")
    structured_output: str = _option(
        "json_schema",
        "openai:<model>@<URL>: how the endpoint takes a JSON schema (json_object for "
        "llama_cpp.server, which answers HTTP 500 to json_schema); endpoints from --config say it themselves",
        choices=("json_schema", "json_object", "none"),
    )
    seed: int = _option(0, "baseline:random seed", flag=False)
    # run-level (see the module docstring)
    endpoints: dict[str, EndpointConfig] | None = _option(
        None, "the run's named endpoints (for openai:<model>@<endpoint name>)", flag=False, per_rm=False
    )
    config: HasEndpoints | None = _option(
        None, "a config whose endpoints become ``endpoints`` (then None)", flag=False, per_rm=False
    )
    llm_cache_dir: str | None = _option(None, "the LLM response cache of openai: RMs", flag=False, per_rm=False)
    shard: tuple[int, int] | None = _option(
        None, "hf: (k, n): score only the k-th of n replicas' share of the batches", flag=False, per_rm=False
    )
    extra: dict[str, Any] = _option({}, "anything else an adapter of the caller's reads", flag=False, per_rm=False)

    def __post_init__(self) -> None:
        hints = _hints()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            problem = _type_problem(value, hints[f.name]) or OPTIONS[f.name].problem(value)
            if problem:
                raise RMBError(f"RMOptions {f.name} {problem}")
        if self.config is not None:  # the evaluator keeps the endpoints it needs, not a whole config
            if self.endpoints is not None:
                raise RMBError(
                    "RMOptions config and endpoints: give one (a config's endpoints are read into endpoints)"
                )
            self.endpoints, self.config = dict(self.config.endpoints), None
        if self.devices and self.device is None:
            self.device = self.devices[0]
        elif self.devices and self.device != self.devices[0]:
            raise RMBError(
                f"RMOptions devices and device: give one (devices runs one replica on each of {self.devices})"
            )


OPTIONS: dict[str, Option] = {f.name: f.metadata["option"] for f in dataclasses.fields(RMOptions)}


@functools.cache
def _hints() -> dict[str, Any]:
    from rmb_build.llm.config import EndpointConfig  # a name of the hints, imported only when they are read

    return typing.get_type_hints(RMOptions, localns={"EndpointConfig": EndpointConfig})


@functools.cache
def _flag_hint(name: str) -> object:
    """A flag's type alone: ``rmb evaluate --help`` imports none of the run-level fields' types (pydantic)."""
    annotation = {f.name: f.type for f in dataclasses.fields(RMOptions)}[name]
    return eval(annotation, globals()) if isinstance(annotation, str) else annotation


def _type_problem(value: object, hint: object) -> str | None:
    """Why ``value`` is not of type ``hint`` (None, int, str, bool, list/tuple/dict of those, their unions)."""
    return None if _conforms(value, hint) else f"{value!r}: expected {_type_name(hint)}"


def _conforms(value: object, hint: object) -> bool:
    if hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is tuple:
        return isinstance(value, tuple) and len(value) == len(args) and all(map(_conforms, value, args))
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, cast(type, hint))  # a class: what is left of the forms above


def _type_name(hint: object) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


# ---- rmb evaluate's flags ---------------------------------------------------------------------------------


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_flags(p: argparse._ActionsContainer, *names: str) -> None:
    """The flags of the named options, in that order (a command interleaves them with its own)."""
    defaults = {f.name: f.default for f in dataclasses.fields(RMOptions)}
    for name in names:
        opt = OPTIONS[name]
        default = defaults[name] if opt.cli_default is _FIELD_DEFAULT else opt.cli_default
        hint = _flag_hint(name)
        if hint is bool:
            p.add_argument(flag_name(name), action="store_true", help=opt.help)
            continue
        kw: dict[str, Any] = {"default": default, "help": opt.help}
        if opt.choices:
            kw["choices"] = opt.choices
        if opt.metavar:
            kw["metavar"] = opt.metavar
        if int in (hint, *typing.get_args(hint)):
            kw["type"] = int
        p.add_argument(flag_name(name), **kw)


FLAGS = tuple(name for name, opt in OPTIONS.items() if opt.flag)


def from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The flags' values as RMOptions keywords (parsed and checked; RMBError naming the flag); a flag left at
    a None the command resolves itself is left out."""
    out: dict[str, Any] = {}
    for name in FLAGS:
        opt, value = OPTIONS[name], getattr(args, name)
        if value is None and opt.cli_default is None:
            continue
        try:
            if isinstance(value, str) and opt.parse:
                value = opt.parse(value)
        except ValueError as exc:
            raise RMBError(f"{flag_name(name)} {exc}") from None
        problem = opt.problem(value)
        if problem:
            raise RMBError(f"{flag_name(name)} {problem}")
        out[name] = value
    return out


# ---- the downstream config's per-RM keys -------------------------------------------------------------------


def config_fields(**defaults: object) -> dict[str, Any]:
    """Pydantic field definitions (``create_model``'s keywords) of the per-RM options; ``defaults`` overrides
    where a command's default differs. Validation is the option's own; its message follows the key."""
    from typing import Annotated

    from pydantic import AfterValidator, BeforeValidator, Field

    out: dict[str, Any] = {}
    for f in dataclasses.fields(RMOptions):
        opt = OPTIONS[f.name]
        if not opt.per_rm:
            continue
        factory = f.default_factory
        default = defaults.get(f.name, f.default if factory is dataclasses.MISSING else factory())
        validators: list[AfterValidator | BeforeValidator] = [AfterValidator(functools.partial(_checked, opt))]
        if opt.parse:
            validators.insert(0, BeforeValidator(functools.partial(_parsed, opt)))
        # strict, as RMOptions: ``batch_size: yes`` is refused, not read as 1
        field_info = Field(default=default, description=opt.help, strict=True)
        out[f.name] = (Annotated[(_hints()[f.name], *validators)], field_info)
    return out


def _parsed(opt: Option, value: object) -> object:
    return opt.parse(value) if isinstance(value, str) and opt.parse else value


def _checked(opt: Option, value: object) -> object:
    problem = opt.problem(value)
    if problem:
        raise ValueError(problem)
    return value
