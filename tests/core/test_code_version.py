"""``core.code_version``: a module's version covers the rmb_build modules it reaches, through imports at the top
of a module and inside its functions, so editing either changes a stage's cache key."""

from __future__ import annotations

import os

from rmb_build.core import code_version as code_version_module


def test_reached_modules_follow_imports_inside_functions():
    reached = code_version_module.reached_modules("rmb_build.stages.gold")
    assert "rmb_build.stages.judge" in reached  # imported at the top
    assert "rmb_build.benchmarks.formats" in reached  # imported only inside _gold_inputs
    assert not any(m.startswith("rmb_build.pipeline") for m in reached)


def test_the_code_version_changes_when_a_function_level_import_changes(tmp_path, monkeypatch):
    before = code_version_module.code_version("rmb_build.stages.gold")
    edited = tmp_path / "formats.py"
    real = code_version_module._source_file("rmb_build.benchmarks.formats")
    edited.write_text(real.read_text() + "\n# an edit\n")
    original = code_version_module._source_file
    monkeypatch.setattr(
        code_version_module,
        "_source_file",
        lambda name: edited if name == "rmb_build.benchmarks.formats" else original(name),
    )
    code_version_module.code_version.cache_clear()
    try:
        assert code_version_module.code_version("rmb_build.stages.gold") != before
    finally:
        code_version_module.code_version.cache_clear()


def test_an_edit_that_keeps_the_files_size_and_time_stamp_is_seen(tmp_path, monkeypatch):
    """The parsed imports are kept once a process; keyed by the file's time stamp and size, an edit of the same
    size within one clock tick (or a copy that keeps the stamp: cp -p, rsync -a) was read as the old file."""
    module = tmp_path / "edited.py"
    original = code_version_module._source_file
    monkeypatch.setattr(
        code_version_module, "_source_file", lambda name: module if name == "rmb_build.edited" else original(name)
    )
    module.write_text("from rmb_build.core import items\n")
    stamp = module.stat()
    assert "rmb_build.core.items" in code_version_module.reached_modules("rmb_build.edited")
    module.write_text("from rmb_build.core import paths\n")
    os.utime(module, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert module.stat().st_size == stamp.st_size
    reached = code_version_module.reached_modules("rmb_build.edited")
    assert "rmb_build.core.paths" in reached and "rmb_build.core.items" not in reached
