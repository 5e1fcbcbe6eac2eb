"""A batch's cache key covers the code its stage reaches: modules imported at the top of a module and
those imported inside its functions, so editing either makes the key change."""

from __future__ import annotations

from rmb_build.pipeline import keys


def test_reached_modules_follow_imports_inside_functions():
    reached = keys.reached_modules("rmb_build.stages.gold")
    assert "rmb_build.stages.judge" in reached  # imported at the top
    assert "rmb_build.benchmarks.formats" in reached  # imported only inside _gold_inputs
    assert not any(m.startswith("rmb_build.pipeline") for m in reached)


def test_the_code_version_changes_when_a_function_level_import_changes(tmp_path, monkeypatch):
    before = keys.code_version("rmb_build.stages.gold")
    edited = tmp_path / "formats.py"
    real = keys._source_file("rmb_build.benchmarks.formats")
    edited.write_text(real.read_text() + "\n# an edit\n")
    original = keys._source_file
    monkeypatch.setattr(
        keys, "_source_file", lambda name: edited if name == "rmb_build.benchmarks.formats" else original(name)
    )
    keys.code_version.cache_clear()
    try:
        assert keys.code_version("rmb_build.stages.gold") != before
    finally:
        keys.code_version.cache_clear()
