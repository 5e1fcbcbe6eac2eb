"""The embedded models' cache: one root (``models`` in rmb's user cache), the old root's models moved in rather
than made again, and the torch backend's prepared folder written once when two servers prepare it at once."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from rmb_build.llm import embedded_models, torch_engine
from rmb_build.llm.embedded_models import model_cache_dir, ready_model_cache

# ``_adopt_legacy`` unwrapped: each test moves its own pair of folders (the real one runs once a process)
adopt = embedded_models._adopt_legacy.__wrapped__
NOTES = "rmb_build.llm.embedded_models"


def _model(folder: Path, name: str = "SmolLM2.torch-abc", content: str = "{}") -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "config.json").write_text(content)
    return folder / name


def _notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == NOTES]


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


def test_the_old_model_cache_is_moved_under_the_user_cache_once_and_said(tmp_path, monkeypatch, caplog):
    """Issue 49: the models had their own root (``~/.cache/rmb_build/models``) beside rmb's (``~/.cache/rmb``).
    They now live in ``models`` under rmb's; what the old root holds is moved in (one line), not made again."""
    caplog.set_level("INFO", NOTES)
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
    assert _notes(caplog) == [f"moved 1 embedded model cache entries from {legacy} to {model_cache_dir()}"]
    ready_model_cache()
    assert len(_notes(caplog)) == 1  # said once
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


def test_a_new_root_that_links_to_the_old_one_keeps_its_models_and_its_target(tmp_path, caplog):
    """A reviewer's finding: a user who linked the new root to the old one by hand. The entries were "moved" onto
    themselves, and where the old root held nothing but hidden folders the final ``rmdir`` removed the folder
    the new root points to: the link dangled, and a torch server could not create its cache."""
    caplog.set_level("INFO", NOTES)
    old, new = tmp_path / "old" / "models", tmp_path / "new"
    old.mkdir(parents=True)
    new.symlink_to(old, target_is_directory=True)
    adopt(old, new)
    assert old.is_dir() and new.is_dir(), "the link's target was removed"
    _model(old)
    adopt(old, new)
    assert (new / "SmolLM2.torch-abc" / "config.json").is_file() and new.is_symlink()
    notes = _notes(caplog)
    assert len(notes) == 2 and all(f"{new} is the old cache {old}" in n for n in notes), notes


def test_an_old_root_that_links_to_a_shared_store_keeps_its_models(tmp_path, caplog):
    """A reviewer's finding: the old root linked to a team's model store; its models were moved out of it."""
    caplog.set_level("INFO", NOTES)
    shared, old, new = tmp_path / "team-models", tmp_path / "home" / "models", tmp_path / "new"
    _model(shared)
    old.parent.mkdir()
    old.symlink_to(shared, target_is_directory=True)
    adopt(old, new)
    assert (shared / "SmolLM2.torch-abc" / "config.json").is_file() and old.is_symlink()
    assert not (new / "SmolLM2.torch-abc").exists()
    (note,) = _notes(caplog)
    assert f"{old} is in a symbolic link ({old}) to {shared}" in note and f"RMB_MODEL_CACHE={shared}" in note, note


def test_an_old_root_under_a_linked_folder_keeps_its_models(tmp_path, caplog):
    """A reviewer's finding: ``~/.cache/rmb_build`` (the old root's parent) linked to a team's store; its models
    were moved out of the store and its ``models`` folder removed."""
    caplog.set_level("INFO", NOTES)
    store, home, new = tmp_path / "team", tmp_path / "home", tmp_path / "new"
    _model(store / "models")
    home.mkdir()
    (home / "rmb_build").symlink_to(store, target_is_directory=True)
    old = home / "rmb_build" / "models"
    adopt(old, new)
    assert (store / "models" / "SmolLM2.torch-abc" / "config.json").is_file()
    assert not (new / "SmolLM2.torch-abc").exists()
    (note,) = _notes(caplog)
    assert f"in a symbolic link ({home / 'rmb_build'})" in note and "nothing moved" in note, note


def test_entries_another_process_moved_meanwhile_are_not_counted_as_left(tmp_path, caplog, monkeypatch):
    """A reviewer's finding: two processes adopting at once each counted the entries the other had just moved as
    'already there' and warned that they were left, when nothing was."""
    caplog.set_level("INFO", NOTES)
    old, new = tmp_path / "old", tmp_path / "new"
    _model(old, "SmolLM2.torch-abc")
    _model(new, "SmolLM2.torch-def")  # moved there by the other process after this one listed the old root
    stale = [old / "SmolLM2.torch-abc", old / "SmolLM2.torch-def"]
    real_iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: iter(stale) if self == old else real_iterdir(self))
    adopt(old, new)
    (note,) = _notes(caplog)
    assert note == f"moved 1 embedded model cache entries from {old} to {new}", note
    assert all(r.levelname == "INFO" for r in caplog.records if r.name == NOTES)


def test_a_linked_entry_of_the_old_root_is_left_and_counted(tmp_path, caplog):
    """A reviewer's finding: a link inside the old root was moved as it was, so a relative one dangled."""
    caplog.set_level("INFO", NOTES)
    old, new = tmp_path / "cache" / "rmb_build" / "models", tmp_path / "new"
    _model(old.parent / "elsewhere", "SmolLM2.torch-def")
    old.mkdir(parents=True)
    (old / "SmolLM2.torch-def").symlink_to("../elsewhere/SmolLM2.torch-def")
    _model(old)
    adopt(old, new)
    assert (new / "SmolLM2.torch-abc" / "config.json").is_file()
    assert not os.path.lexists(new / "SmolLM2.torch-def"), "a relative link moved: it dangles there"
    assert (old / "SmolLM2.torch-def" / "config.json").is_file()
    (note,) = _notes(caplog)
    assert f"moved 1 embedded model cache entries from {old} to {new}" in note, note
    assert "left 1 there (1 a symbolic link)" in note, note


def test_roots_one_inside_the_other_move_nothing(tmp_path, caplog):
    caplog.set_level("INFO", NOTES)
    old = tmp_path / "old"
    _model(old)
    for new in (old / "new", tmp_path):  # the new root inside the old one; the old root inside the new one
        adopt(old, new)
        assert (old / "SmolLM2.torch-abc" / "config.json").is_file() and not (new / "SmolLM2.torch-abc").exists()
    notes = _notes(caplog)
    assert len(notes) == 2 and all("one inside the other: nothing moved" in n for n in notes), notes


def test_an_entry_the_new_root_has_already_is_kept_and_the_old_one_counted(tmp_path, caplog):
    caplog.set_level("INFO", NOTES)
    old, new = tmp_path / "old", tmp_path / "new"
    _model(old, content='{"old": 1}')
    _model(old, "SmolLM2.tokenizer-abc")
    _model(new, content='{"new": 1}')
    adopt(old, new)
    assert (new / "SmolLM2.torch-abc" / "config.json").read_text() == '{"new": 1}'
    assert (old / "SmolLM2.torch-abc" / "config.json").read_text() == '{"old": 1}'
    assert (new / "SmolLM2.tokenizer-abc").is_dir() and not (old / "SmolLM2.tokenizer-abc").exists()
    (note,) = _notes(caplog)
    assert f"moved 1 embedded model cache entries from {old} to {new}; left 1 there (1 already in {new})" in note
    adopt(old, new)  # the next start: what stays is said again, quietly (a reviewer: a warning on every start)
    assert [r.levelname for r in caplog.records if r.name == NOTES] == ["WARNING", "INFO"]


def test_an_old_root_that_cannot_be_moved_from_is_said_and_left(tmp_path, caplog, monkeypatch):
    """A read-only old root (simulated: this suite may run as root, whom permissions do not stop)."""
    caplog.set_level("INFO", NOTES)
    old, new = tmp_path / "old", tmp_path / "new"
    _model(old)

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(embedded_models.os, "rename", refuse)
    adopt(old, new)
    assert (old / "SmolLM2.torch-abc" / "config.json").is_file()
    (note,) = _notes(caplog)
    assert f"the embedded models' old cache {old} could not be moved into {new} (Permission denied)" in note, note


def test_an_old_root_that_is_a_file_is_left_alone(tmp_path, caplog):
    caplog.set_level("INFO", NOTES)
    old, new = tmp_path / "old", tmp_path / "new"
    old.write_text("not a folder")
    adopt(old, new)
    assert old.read_text() == "not a folder" and _notes(caplog) == []


def test_the_cache_note_lands_on_a_line_of_its_own_above_a_live_progress_bar(tmp_path, capsys, caplog):
    """A reviewer's finding: the note was printed to stderr while ``rmb build``'s bars were live (the first torch
    server starts mid-stage), so it ran on from a bar's text, mid-line. It now goes through logging, which the
    build's bars write above themselves, as every other line of the build."""
    import logging
    import re
    import sys

    from rmb_build.pipeline.progress import BuildProgress

    caplog.set_level("INFO", NOTES)  # as the CLI sets rmb_build's loggers
    old, new = tmp_path / "old", tmp_path / "new"
    _model(old)
    console = logging.StreamHandler(sys.stderr)  # the CLI's console handler (``cli.configure_logging``)
    logging.getLogger().addHandler(console)
    try:
        progress = BuildProgress(logging.getLogger("test.cache.note"), "bars")
        try:
            progress.expect("generate", 3)
            progress.begin("generate")
            adopt(old, new)
        finally:
            progress.close()
    finally:
        logging.getLogger().removeHandler(console)
    err = capsys.readouterr().err
    note = f"moved 1 embedded model cache entries from {old} to {new}"
    assert "generate" in err  # a bar was drawn
    assert [part for part in re.split(r"[\r\n]", err) if "embedded model cache" in part] == [note], err
    assert f"\n{note}\n" in err.replace("\r", "\n"), err


def test_a_server_waiting_for_another_preparing_its_model_stops_with_that_line_before_its_startup_timeout(
    tmp_path, monkeypatch
):
    """A reviewer's finding: a torch server waited up to 900 s for another process preparing its model, its parent
    only 300 s for it to start, so it was killed mid-wait with "did not answer within 300s" and no word of what
    it waited for. The wait is now what the startup timeout leaves beside a load, said as it begins; a wait run
    out stops the server with one line naming the process preparing (timeouts shrunk to seconds here)."""
    import pytest

    from rmb_build.core import lock
    from rmb_build.llm import server as server_module
    from rmb_build.llm.server import EmbeddedServer, ServerError

    gguf, cache = tmp_path / "model.gguf", tmp_path / "cache"
    gguf.write_bytes(b"GGUF" + bytes(4096))
    monkeypatch.setattr(server_module, "TORCH_STARTUP_S", 60.0)
    monkeypatch.setattr(server_module, "TORCH_LOAD_S", 58.0)
    server = EmbeddedServer(
        (),
        model_files={"m": gguf},
        backend="torch",
        model_cache_dir=cache,
        log_path=tmp_path / "server.log",
        startup_timeout_s=1,
    )
    assert server._config(1)["prepare_wait_s"] == 2.0
    folder = torch_engine.prepared_folder(gguf, cache)
    with lock.hold_out(folder, "the model cache"), pytest.raises(ServerError) as refused:  # another is preparing
        server.start()
    line = str(refused.value)
    assert "\n" not in line and "exited with status 2 while starting" in line, line
    assert f"waiting up to 2s for {folder}, being prepared by pid {os.getpid()}" in line, line
    assert f"the model cache {folder}: in use by pid {os.getpid()}" in line, line
    assert not folder.exists()


def test_the_prepare_wait_leaves_a_torch_servers_startup_time_to_load():
    from rmb_build.llm import config, server

    assert 0 < torch_engine.PREPARE_WAIT_S == config.TORCH_STARTUP_S - config.TORCH_LOAD_S
    long = server.EmbeddedServer(backend="torch", startup_timeout_s=600)
    assert long.startup_s == 600 and long.startup_s - config.TORCH_LOAD_S > torch_engine.PREPARE_WAIT_S
    assert server.EmbeddedServer(backend="torch").startup_s == config.TORCH_STARTUP_S
