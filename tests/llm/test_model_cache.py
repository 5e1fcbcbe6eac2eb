"""The embedded models' cache: one root (``models`` in rmb's user cache), the old root's models moved in rather
than made again, and the torch backend's prepared folder written once when two servers prepare it at once."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from rmb_build.llm import embedded_models, torch_engine
from rmb_build.llm.embedded_models import model_cache_dir, ready_model_cache


def _slow_dequantise(gguf: Path, folder: Path) -> None:
    """Stands in for the minute of dequantising: says who wrote, then writes after a pause."""
    with open(gguf.parent / "writers.log", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(1.5)
    (folder / "config.json").write_text(f'{{"writer": {os.getpid()}}}')


def _prepare_into(gguf: Path, cache: Path, result: Path) -> None:
    result.write_text(str(torch_engine.prepared(gguf, cache)))


def test_two_servers_preparing_one_model_at_once_write_it_once_and_both_load_it(tmp_path, monkeypatch):
    """Issue 49: two torch servers of one endpoint (``servers: 2``) prepare the same model at once. Each wrote its
    own temporary folder and the second rename failed silently; through ``atomic_dir`` alone the second would be
    refused (one writer at a time). Now the second waits for the first's folder: written once, the same for
    both, nothing left beside it."""
    gguf, cache = tmp_path / "model.gguf", tmp_path / "cache"
    gguf.write_bytes(b"GGUF" + bytes(4096))
    monkeypatch.setattr(torch_engine, "_dequantise", _slow_dequantise)
    fork = multiprocessing.get_context("fork")  # the child keeps the stand-in
    other = fork.Process(target=_prepare_into, args=(gguf, cache, tmp_path / "other"))
    other.start()
    mine = torch_engine.prepared(gguf, cache)
    other.join(120)
    assert other.exitcode == 0
    assert Path((tmp_path / "other").read_text()) == mine and (mine / "config.json").is_file()
    assert len((tmp_path / "writers.log").read_text().split()) == 1
    assert [p.name for p in cache.iterdir()] == [mine.name]  # no temporary folder, no lock file left


def test_the_old_model_cache_is_moved_under_the_user_cache_once_and_said(tmp_path, monkeypatch, capsys):
    """Issue 49: the models had their own root (``~/.cache/rmb_build/models``) beside rmb's (``~/.cache/rmb``).
    They now live in ``models`` under rmb's; what the old root holds is moved in (one line), not made again."""
    monkeypatch.delenv(embedded_models.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    legacy = tmp_path / "home" / ".cache" / "rmb_build" / "models"
    (legacy / "SmolLM2.torch-abc").mkdir(parents=True)
    (legacy / "SmolLM2.torch-abc" / "config.json").write_text("{}")
    (legacy / ".SmolLM2.torch-def.tmp-1-x").mkdir()  # a writer's temporary folder: not ours to move
    monkeypatch.setattr(embedded_models, "LEGACY_CACHE", legacy)
    assert model_cache_dir() == tmp_path / "xdg" / "rmb" / "models"
    assert ready_model_cache() == model_cache_dir()
    assert (model_cache_dir() / "SmolLM2.torch-abc" / "config.json").is_file()
    assert not (legacy / "SmolLM2.torch-abc").exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"moved 1 embedded model cache entries from {legacy}" in err, err
    ready_model_cache()
    assert capsys.readouterr().err == ""  # said once
    monkeypatch.setenv(embedded_models.CACHE_ENV, str(tmp_path / "mine"))
    assert ready_model_cache() == tmp_path / "mine"


def test_doctor_lists_the_model_cache_and_an_old_one_left(tmp_path, monkeypatch):
    from rmb_build.commands.doctor import caches_report

    monkeypatch.delenv(embedded_models.CACHE_ENV, raising=False)
    monkeypatch.setattr(embedded_models, "LEGACY_CACHE", tmp_path / "old")
    caches = caches_report()
    assert caches["embedded models (assembled GGUF files, the torch backend's weights)"] == str(model_cache_dir())
    assert str(model_cache_dir()).startswith(caches["rmb (user cache)"])
    (tmp_path / "old").mkdir()
    assert str(tmp_path / "old") in caches_report().values()
