"""``rmb doctor``: torch's build and the device it sees, the extras installed, the cache folders in use."""

from __future__ import annotations

import json
import sys

import pytest
from huggingface_hub import constants

from rmb_build import __version__
from rmb_build.cli import main
from rmb_build.core.extras import PROVIDED_BY

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml


def test_doctor_says_torchs_build_the_device_the_extras_and_the_caches(tmp_path, monkeypatch, capsys):
    import torch  # here, not at the top: the worker that collects this module without running it never imports it

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"rmb_build {__version__} on Python {sys.version.split()[0]} ({sys.executable})"
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
    assert out[1].startswith(f"torch {torch.__version__}: {build} build; device: "), out[1]
    assert out[1].split("device: ")[1].startswith("cuda" if torch.cuda.is_available() else ("cpu", "mps"))
    assert [ln.split(":")[0] for ln in out if ln.startswith("extra ")] == [
        f"extra {e}" for e in dict.fromkeys(PROVIDED_BY.values())
    ]
    assert "extra build: installed" in out  # the test set-up installs the build extra
    caches = dict(ln.removeprefix("cache, ").split(": ", 1) for ln in out if ln.startswith("cache, "))
    assert caches["rmb (user cache)"] == f"{tmp_path / 'xdg' / 'rmb'} (not created yet)"
    assert caches["rmb evaluate scores"].startswith(str(tmp_path / "xdg" / "rmb" / "score_cache"))
    assert caches["Hugging Face (models, datasets)"].startswith(str(constants.HF_HUB_CACHE))
    assert caches["builds (data/, runs/ with each build's LLM cache)"] == str(tmp_path.resolve())


def test_doctor_json_is_one_object(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["doctor", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["torch"]["version"] == torch.__version__ and rep["extras"]["build"]["installed"] is True
    assert set(rep["extras"]) == set(PROVIDED_BY.values())


def test_doctor_says_a_linked_old_model_cache_is_left_as_it_is(tmp_path, monkeypatch):
    from rmb_build.commands.doctor import caches_report
    from rmb_build.llm import embedded_models

    store, old = tmp_path / "team-store", tmp_path / "old-models"
    store.mkdir()
    old.symlink_to(store)
    monkeypatch.setattr(embedded_models, "LEGACY_CACHE", old)
    labels = [label for label, path in caches_report().items() if path == str(old)]
    assert labels == ["embedded models, old place (a link, left as it is: RMB_MODEL_CACHE may name its target)"]
