"""The version of a module's code: a hash of its source and of every ``rmb_build`` module it reaches through
its imports, at the top of a module or inside its functions (read from the source, not imported). Stage cache
keys (``pipeline/keys``) and the trained default classifier's file name (``stages/classify``) read it, so an
edit to a helper changes them too."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
from functools import lru_cache
from pathlib import Path

from rmb_build import __version__


def _source_file(name: str) -> Path | None:
    """The file of module ``name`` (found, not imported; a package's parents are), or None."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, AttributeError, ValueError):  # a name inside a module, not a module
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _source(name: str) -> str:
    """The source text of module ``name`` ("" where it has no .py file)."""
    path = _source_file(name)
    return path.read_text(encoding="utf-8") if path is not None else ""


@lru_cache(maxsize=None)
def _imports_of_source(source: str) -> frozenset[str]:
    """The rmb_build modules (outside the pipeline) a module's source imports anywhere, parsed once a process
    (keyed by the text itself: an edit that keeps the file's size and time stamp is still seen): each stage's key
    walked the modules it reaches, and the stages reach mostly the same ones (eight stages parsed 75 modules 424
    times, 1.3 s of CPU in each process that builds)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # ``from package import module``
    return frozenset(
        m
        for m in found
        if m.startswith("rmb_build.") and not m.startswith("rmb_build.pipeline") and _source_file(m) is not None
    )


def reached_sources(module_name: str) -> dict[str, str]:
    """``module_name`` and every rmb_build module (outside the pipeline) it reaches through its imports (at its top
    and inside its functions, so that editing a helper imported where it is used counts too), each with its
    source: each file read once, so that the imports followed and the text hashed are the same version of it."""
    sources: dict[str, str] = {}
    stack = [module_name]
    while stack:
        name = stack.pop()
        if name not in sources:
            sources[name] = _source(name)
            stack.extend(_imports_of_source(sources[name]) - sources.keys())
    return sources


def reached_modules(module_name: str) -> set[str]:
    """``module_name`` and every rmb_build module (outside the pipeline) it reaches through its imports."""
    return set(reached_sources(module_name))


@lru_cache(maxsize=None)
def code_version(module_name: str) -> str:
    """Hash of the source of ``module_name`` and every rmb_build module it reaches."""
    h = hashlib.sha256(__version__.encode())
    for name, source in sorted(reached_sources(module_name).items()):
        h.update(name.encode() + b"\0" + source.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


__all__ = ["code_version", "reached_modules"]
