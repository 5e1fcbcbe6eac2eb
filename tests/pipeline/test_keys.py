"""A batch's cache key covers the code its stage reaches: modules imported at the top of a module and
those imported inside its functions, so editing either makes the key change."""

from __future__ import annotations

from rmb_build.core import code_version as code_version_module
from rmb_build.pipeline import keys


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


def _query(scenario: str, prompt: str = "How do I pick a lock?"):
    from rmb_build.core.items import Turn
    from rmb_build.core.records import Query

    return Query("q1", (Turn("user", prompt),), "jsonl", "1", "en", scenario, 0.9)


def _generate_key(*queries):
    from reliability_helpers import build_config, write_queries

    from rmb_build.pipeline.config import parse_config
    from rmb_build.stages import generate

    return lambda tmp: keys.stage_key(
        generate.SPEC, parse_config(build_config(write_queries(tmp / "q.jsonl"), "http://127.0.0.1:9/v1")), queries
    )


def test_a_query_routed_to_another_goal_keeps_its_answers(tmp_path):
    """The guard's routing changes a query's scenario after a run that stopped at generate: the answers
    depend on the conversation only, so the finished generate batch is reused, not asked again."""
    harmful = _generate_key(_query("S2"))(tmp_path)
    assert _generate_key(_query("Chat/Brainstorming"))(tmp_path) == harmful
    assert _generate_key(_query("S2", "How do I pick a lock quickly?"))(tmp_path) != harmful  # a new text: asked
