"""Explicit cache keys for stage tasks: the inputs, the stage's code, its prompts and its models.

Prefect's ``TASK_SOURCE`` policy hashes only the task function's own source and misses edits in
the helpers it calls, so each stage key hashes every ``rmb_build`` module the stage module reaches
through its imports, at the top of a module or inside its functions (read from the source, not
imported).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable

from rmb_build.core.code_version import code_version
from rmb_build.core.jsonable import jsonable

if TYPE_CHECKING:
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.stages.spec import StageSpec


def fingerprint(*parts: object) -> str:
    """A 32-hex-digit hash of JSON-able parts (dataclasses and pydantic models included)."""
    payload = json.dumps(jsonable(parts, strict=True), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def by_cache_key(context: object, parameters: dict[str, Any]) -> str:
    """Prefect ``cache_key_fn``: the key the flow computed and passed as ``cache_key``."""
    return parameters["cache_key"]


# --- one key per stage task --------------------------------------------------------------------


def _records(items: object, reads: Callable[[Any], object] | None = None) -> list[object]:
    """What the key reads of one input: each of its records (``reads``: what of each), as JSON where it has a form."""
    assert isinstance(items, Iterable), type(items)  # a spec keys only inputs that are collections of records
    if reads is not None:
        return [reads(r) for r in items]
    return [r.to_json() if hasattr(r, "to_json") else r for r in items]


def prompts_digest(*folders: str) -> str:
    """Hash of the prompt files under the given ``prompts/`` sub-folders (or top-level files)."""
    from rmb_build.pipeline.manifest import prompt_hashes

    return fingerprint({k: v for k, v in prompt_hashes().items() if k.split("/", 1)[0] in folders})


def _endpoints(cfg: BuildConfig, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    from rmb_build.llm.endpoint import endpoint_description

    return {n: endpoint_description(cfg.endpoints[n]) for n in sorted(set(names))}


def encoder_identity(cfg: BuildConfig) -> list[str]:
    """The build's sentence encoder as its vectors depend on it: model (version), backend, stored dtype."""
    from rmb_build.embed.encoder import model_fingerprint

    return [model_fingerprint(cfg.embeddings.model, cfg.embeddings.backend), cfg.embeddings.dtype]


def stage_key(spec: StageSpec, cfg: BuildConfig, *inputs: object) -> str:
    """One batch's key for ``spec`` (a ``StageSpec``): its stage, its code, its config section, then
    what the spec says the key reads, in this order: the section's endpoints, the stage's own
    identity parts, the encoder, the prompts, the batch's inputs."""
    section = spec.section(cfg)
    parts: list[object] = [spec.stage, code_version(spec.module), section]
    if spec.endpoints is not None:
        names = spec.endpoints(section)
        parts.append(_endpoints(cfg, names) if names is not None else None)
    if spec.identity is not None:
        parts.extend(spec.identity(cfg))
    if spec.encoder:
        parts.append(encoder_identity(cfg))
    if spec.prompts:
        parts.append(prompts_digest(*spec.prompts))
    if spec.keyed_inputs:
        parts.extend(_records(i, spec.key_reads) for i in inputs)
    return fingerprint(*parts)
