"""``rmb doctor``: what this installation runs on, in a few lines: rmb_build and Python, torch's build
(CPU or CUDA) and the device it sees, which optional extras are installed, and the cache folders in use.
It reads the environment only: nothing is downloaded, written or started."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")


def torch_report() -> dict[str, Any]:
    """torch's version, its build (CPU, CUDA x.y or ROCm x.y) and the device it would score on."""
    if importlib.util.find_spec("torch") is None:
        return {"version": None, "build": None, "device": None}
    import torch

    if torch.version.cuda:
        build = f"CUDA {torch.version.cuda}"
    elif getattr(torch.version, "hip", None):
        build = f"ROCm {torch.version.hip}"
    else:
        build = "CPU"
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        device = f"cuda ({count} GPU{'s' if count > 1 else ''}: {torch.cuda.get_device_name(0)})"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        device = "mps"
    else:
        device = f"cpu ({os.cpu_count()} cores)"
    return {"version": torch.__version__, "build": build, "device": device}


def extras_report() -> dict[str, dict[str, Any]]:
    """Per optional extra (``core/extras.py``): installed or not, and the modules it lacks."""
    from rmb_build.core.extras import PROVIDED_BY

    out: dict[str, dict[str, Any]] = {}
    for module, extra in PROVIDED_BY.items():
        row = out.setdefault(extra, {"installed": True, "missing": []})
        if importlib.util.find_spec(module) is None:
            row["installed"] = False
            row["missing"].append(module)
    return out


def embedded_report() -> dict[str, Any]:
    """The embedded endpoint (the demo's): the backend ``auto`` runs it on and its model file, or how to get it."""
    from rmb_build.core.extras import install_line
    from rmb_build.llm.config import BACKEND_EXTRAS, EndpointConfig, backend_installed
    from rmb_build.llm.embedded_models import EMBEDDED, MissingModelPackage

    backend = EndpointConfig(embedded="smollm2").embedded_backend
    model = EMBEDDED.get("smollm2")
    try:
        path = model.locate(None)
        found: str | None = str(path) if path.is_file() else None
    except MissingModelPackage:
        found = None
    return {
        "backend": backend,
        "backend_installed": backend_installed(backend),
        "backend_install": install_line(BACKEND_EXTRAS[backend]),
        "model": "smollm2",
        "model_file": found,
        "model_install": model.install,
    }


def caches_report() -> dict[str, str]:
    """The cache folders a command reads and writes, as this environment resolves them."""
    from huggingface_hub import constants

    from rmb_build.benchmarks.fetch import cache_dir
    from rmb_build.core.paths import user_cache_dir, workdir
    from rmb_build.evaluate.cache import default_cache_dir
    from rmb_build.llm.embedded_models import LEGACY_CACHE, linked_legacy, model_cache_dir
    from rmb_build.stages.classify import trained_classifier_dir

    caches = {
        "Hugging Face (models, datasets)": str(constants.HF_HUB_CACHE),
        "rmb (user cache)": str(user_cache_dir()),
        "rmb evaluate scores": str(default_cache_dir()),
        "official releases": str(cache_dir()),
        "trained classifiers": str(trained_classifier_dir()),
        "embedded models (assembled GGUF files, the torch backend's weights)": str(model_cache_dir()),
        "builds (data/, runs/ with each build's LLM cache)": str(workdir()),
    }
    if linked_legacy(LEGACY_CACHE) is not None:  # _adopt_legacy leaves a linked old place whole
        caches["embedded models, old place (a link, left as it is: RMB_MODEL_CACHE may name its target)"] = str(
            LEGACY_CACHE
        )
    elif LEGACY_CACHE.is_dir():
        caches["embedded models, old place (moved into the one above on the next start)"] = str(LEGACY_CACHE)
    return caches


def report() -> dict[str, Any]:
    from rmb_build import __version__

    return {
        "rmb_build": __version__,
        "python": f"{sys.version.split()[0]} ({sys.executable})",
        "torch": torch_report(),
        "extras": extras_report(),
        "embedded": embedded_report(),
        "caches": caches_report(),
        "hub_offline": os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"),
    }


def _where(path: str) -> str:
    return path + ("" if Path(path).exists() else " (not created yet)")


def run(args: argparse.Namespace) -> int:
    from rmb_build.core.extras import install_line

    rep = report()
    if args.json:
        print(json.dumps(rep, ensure_ascii=False))
        return 0
    t = rep["torch"]
    print(f"rmb_build {rep['rmb_build']} on Python {rep['python']}")
    if t["version"] is None:
        print("torch: not installed (pip install -e . installs it)")
    else:
        print(f"torch {t['version']}: {t['build']} build; device: {t['device']}")
    for extra, row in rep["extras"].items():
        state = (
            "installed" if row["installed"] else f"not installed ({', '.join(row['missing'])}): {install_line(extra)}"
        )
        print(f"extra {extra}: {state}")
    e = rep["embedded"]
    state = "" if e["backend_installed"] else f" (not installed: {e['backend_install']})"
    print(f"embedded endpoint (backend auto): {e['backend']}{state}")
    print(f"embedded model {e['model']}: {e['model_file'] or 'not installed: ' + e['model_install']}")
    for what, path in rep["caches"].items():
        print(f"cache, {what}: {_where(path)}")
    if rep["hub_offline"]:
        print("HF_HUB_OFFLINE=1: models and datasets are read from the cache only")
    return 0
