"""Explicit cache keys for stage tasks: the inputs, the stage's code, its prompts and its models.

Prefect's ``TASK_SOURCE`` policy hashes only the task function's own source and misses edits in
the helpers it calls, so each stage key hashes every ``rmb_build`` module the stage module reaches
through its imports, at the top of a module or inside its functions (read from the source, not
imported).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rmb_build import __version__
from rmb_build.core.jsonable import jsonable

if TYPE_CHECKING:
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.stages.spec import StageSpec


def fingerprint(*parts: object) -> str:
    """A 32-hex-digit hash of JSON-able parts (dataclasses and pydantic models included)."""
    payload = json.dumps(jsonable(parts, strict=True), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _source_file(name: str) -> Path | None:
    """The file of module ``name`` (found, not imported; a package's parents are), or None."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, AttributeError, ValueError):  # a name inside a module, not a module
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _imports(name: str) -> set[str]:
    """The rmb_build modules (outside the pipeline) that module ``name`` imports anywhere: at its top
    and inside its functions, so that editing a helper imported where it is used changes the key too."""
    path = _source_file(name)
    if path is None:
        return set()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # ``from package import module``
    return {
        m
        for m in found
        if m.startswith("rmb_build.") and not m.startswith("rmb_build.pipeline") and _source_file(m) is not None
    }


def reached_modules(module_name: str) -> set[str]:
    """``module_name`` and every rmb_build module (outside the pipeline) it reaches through its imports."""
    seen: set[str] = set()
    stack = [module_name]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(_imports(name) - seen)
    return seen


@lru_cache(maxsize=None)
def code_version(module_name: str) -> str:
    """Hash of the source of ``module_name`` and every rmb_build module it reaches."""
    h = hashlib.sha256(__version__.encode())
    for name in sorted(reached_modules(module_name)):
        path = _source_file(name)
        source = path.read_text(encoding="utf-8") if path is not None else ""
        h.update(name.encode() + b"\0" + source.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


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
