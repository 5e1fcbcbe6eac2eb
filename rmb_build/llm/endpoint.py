"""What identifies an endpoint, in one place: for cache keys, cache rows, stage keys and manifests.

An identity never holds a credential: a URL loses its user info, query and fragment (where keys
and tokens hide), and an embedded endpoint is named by its model (its port changes every run).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from rmb_build.llm.config import EndpointConfig


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def public_url(url: str) -> str:
    """``url`` without user info, query or fragment (where tokens hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def endpoint_identity(endpoint: EndpointConfig) -> str:
    """The endpoint in a cache key: ``embedded:<model>`` (llama.cpp), ``embedded:<model>@torch`` (the torch
    backend: its replies differ), or its base URL without credentials."""
    if not endpoint.embedded:
        return public_url(str(endpoint.base_url or ""))
    backend = endpoint.embedded_backend
    return f"embedded:{endpoint.embedded}" + ("" if backend == "llama_cpp" else f"@{backend}")


def endpoint_description(endpoint: EndpointConfig) -> dict[str, Any]:
    """The endpoint for a manifest or a stage key: its identity, and for an embedded model the
    package (and version) that ships its weights and the context size it runs with."""
    if endpoint.embedded:
        from rmb_build.llm.embedded_models import EMBEDDED

        pkg = EMBEDDED.get(endpoint.embedded).package if endpoint.embedded in EMBEDDED else endpoint.embedded
        described: dict[str, Any] = {
            "embedded": endpoint.embedded,
            "package": pkg,
            "version": package_version(pkg),
            "n_ctx": endpoint.n_ctx,
        }
        backend = endpoint.embedded_backend
        if backend != "llama_cpp":  # llama.cpp's entries stay as they were before there was a choice
            described["backend"] = backend
            described["backend_version"] = package_version("transformers")
        return described
    return {"base_url": endpoint_identity(endpoint)}
