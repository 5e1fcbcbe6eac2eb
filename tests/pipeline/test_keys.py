"""A batch's cache key: the code its stage reaches (``core.code_version``, tests/core/test_code_version.py) and
what the batch holds."""

from __future__ import annotations

from rmb_build.pipeline import keys


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
