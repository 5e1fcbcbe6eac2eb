"""What the command line tells a reward-model adapter (``RMOptions``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RMOptions:
    """Everything from the command line that an adapter may use; each adapter reads what it needs."""

    batch_size: int = 16
    dtype: str = "auto"  # auto | bf16 | fp16 | fp32
    max_length: int | None = None
    chat_template: str | None = None  # a Jinja template string or a file holding one
    device: str | None = None  # None: cuda when present, else cpu
    trust_remote_code: bool = False  # hf:/dpo: run the model's own code
    revision: str | None = None  # hf:/dpo: Hub branch, tag or commit
    attn_implementation: str | None = None  # hf:/dpo: eager, sdpa, flash_attention_2, ...
    family: str | None = None  # hf: the reward-model family (rmb_build.evaluate.families); None: default
    device_map: str | None = None  # hf: "auto": accelerate spreads the layers over GPUs, CPU memory, disk
    max_memory: dict[Any, str] | None = None  # hf: with device_map, the memory each device may hold
    load_in: str | None = None  # hf: "8bit" | "4bit" with bitsandbytes (CUDA only)
    protocol: str = "native"  # hf: the harness protocol (rmb_build.evaluate.protocols) texts are prepared by
    devices: list[str] | None = None  # hf: one model replica per device (evaluate.devices); None: one device
    shard: tuple[int, int] | None = None  # hf: (k, n): score only the k-th of n replicas' share of the batches
    seed: int = 0
    votes: int = 1
    judge_mode: str = "pairwise"  # pairwise | pointwise
    with_criteria: bool = False
    config: Any = None  # a BuildConfig (for openai:<model>@<endpoint name>)
    structured_output: str = "json_schema"  # openai:<model>@<URL>: json_schema | json_object | none
    llm_cache_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
