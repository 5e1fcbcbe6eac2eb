"""Explicit cache keys for stage tasks: the inputs, the stage's code, its prompts and its models.

Prefect's ``TASK_SOURCE`` policy hashes only the task function's own source and misses edits in
the helpers it calls, so each stage key hashes every ``rmb_build`` module the stage module reaches
through its globals (imports done inside functions are not followed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import json
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from rmb_build import __version__


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot fingerprint a {type(obj).__name__}")


def fingerprint(*parts: Any) -> str:
    """A 32-hex-digit hash of JSON-able parts (dataclasses and pydantic models included)."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=_jsonable)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _deps(module: ModuleType) -> set[str]:
    out = set()
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name.startswith("rmb_build") and not name.startswith("rmb_build.pipeline"):
            out.add(name)
    return out


def reached_modules(module_name: str) -> set[str]:
    """``module_name`` and every rmb_build module (outside the pipeline) reachable through module globals."""
    seen: set[str] = set()
    stack = [module_name]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(_deps(importlib.import_module(name)) - seen)
    return seen


@lru_cache(maxsize=None)
def code_version(module_name: str) -> str:
    """Hash of the source of ``module_name`` and every rmb_build module it reaches."""
    h = hashlib.sha256(__version__.encode())
    for name in sorted(reached_modules(module_name)):
        try:
            source = inspect.getsource(importlib.import_module(name))
        except (OSError, TypeError):  # a namespace package or a module without a file
            source = ""
        h.update(name.encode() + b"\0" + source.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


def by_cache_key(context: Any, parameters: dict[str, Any]) -> str:
    """Prefect ``cache_key_fn``: the key the flow computed and passed as ``cache_key``."""
    return parameters["cache_key"]


# --- one key per stage task --------------------------------------------------------------------


def _records(items: Any) -> list[Any]:
    return [r.to_json() if hasattr(r, "to_json") else r for r in items]


def prompts_digest(*folders: str) -> str:
    """Hash of the prompt files under the given ``prompts/`` sub-folders (or top-level files)."""
    from rmb_build.pipeline.manifest import prompt_hashes

    return fingerprint({k: v for k, v in prompt_hashes().items() if k.split("/", 1)[0] in folders})


def _endpoints(cfg: Any, names: Any) -> dict[str, Any]:
    from rmb_build.llm.endpoint import endpoint_description

    return {n: endpoint_description(cfg.endpoints[n]) for n in sorted(set(names))}


def gather_key(cfg: Any) -> str:
    """Sources as configured and what each source says identifies it (the files behind it, size and
    mtime, or a package version), the gather code, the limit."""
    from rmb_build.stages.sources import source_for

    return fingerprint(
        "gather",
        code_version("rmb_build.stages.gather"),
        cfg.sources,
        [source_for(s).identity() for s in cfg.sources],
        cfg.run.max_queries,
    )


def encoder_identity(cfg: Any) -> list[str]:
    """The build's sentence encoder as its vectors depend on it: model (version), backend, stored dtype."""
    from rmb_build.embed.encoder import model_fingerprint

    return [model_fingerprint(cfg.embeddings.model, cfg.embeddings.backend), cfg.embeddings.dtype]


def dedup_key(cfg: Any, queries: Any) -> str:
    return fingerprint(
        "dedup", code_version("rmb_build.stages.dedup"), cfg.dedup, encoder_identity(cfg), _records(queries)
    )


def classify_key(cfg: Any, queries: Any, *, offline: bool = False) -> str:
    """``offline``: a dry run's LLM classification (cached answers only, the embedding classifier for
    the rest), kept apart from a real run's."""
    from rmb_build.stages.sources import file_identity

    llm = _endpoints(cfg, [cfg.classifier.endpoint]) if cfg.classifier.method == "llm" else None
    if llm is not None and offline:
        llm["offline"] = True
    return fingerprint(
        "classify",
        code_version("rmb_build.stages.classify"),
        cfg.classifier,
        llm,
        file_identity(cfg.classifier.train_release),
        encoder_identity(cfg),
        prompts_digest("classify", "taxonomy.yaml"),
        _records(queries),
    )


def generate_key(cfg: Any, queries: Any) -> str:
    return fingerprint(
        "generate",
        code_version("rmb_build.stages.generate"),
        cfg.generators,
        _endpoints(cfg, (g.endpoint for g in cfg.generators)),
        _records(queries),
    )


def judge_key(cfg: Any, queries: Any, responses: Any) -> str:
    return fingerprint(
        "judge",
        code_version("rmb_build.stages.judge"),
        cfg.judge,
        _endpoints(cfg, [cfg.judge.endpoint]),
        prompts_digest("judge", "criteria"),
        _records(queries),
        _records(responses),
    )


def guard_key(cfg: Any, queries: Any, responses: Any) -> str:
    return fingerprint(
        "guard",
        code_version("rmb_build.stages.guard"),
        cfg.guard,
        _endpoints(cfg, [cfg.guard.endpoint]),
        prompts_digest("guard"),
        _records(queries),
        _records(responses),
    )


def sets_key(cfg: Any, queries: Any, responses: Any, scores: Any, labels: Any) -> str:
    return fingerprint(
        "build_sets",
        code_version("rmb_build.stages.sets"),
        cfg.sets,
        _records(queries),
        _records(responses),
        _records(scores),
        _records(labels),
    )
