"""rmb_build.core.text: one identity rule shared by build_sets and the audit, one renderer, one template engine."""

from __future__ import annotations

import unicodedata

import jinja2
import pytest

from rmb_build.core.items import Turn
from rmb_build.core.records import JudgeScore, Query, Response, query_id
from rmb_build.core.text import display, fill, identity, render_conversation, search_text
from rmb_build.pipeline.release_step import release_of
from rmb_build.release.audit import audit_release
from rmb_build.stages.options import SetsConfig
from rmb_build.stages.sets import build_sets

HELP = "Helpfulness/Open QA/Factual"


def _judged(n: int, answers: dict[str, tuple[str, float]]):
    q = Query(query_id("t", str(n)), (Turn("user", f"question {n}", "English"),), "t", str(n), scenario_id=HELP)
    rs = [Response(q.id, g, g, "local", text) for g, (text, _) in answers.items()]
    ss = [
        JudgeScore(q.id, g, (m,), m, 0.0, ("r",), "local/judge", "criteria/Open QA.md") for g, (_, m) in answers.items()
    ]
    return q, rs, ss


def test_sets_built_from_answers_equal_up_to_form_case_and_space_pass_the_audit():
    nfc = unicodedata.normalize("NFC", "Café au lait, naïve résumé.")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    cases = [
        {"A": (nfc, 9.0), "B": (nfd, 3.0), "C": ("Tea.", 6.0), "D": ("Water.", 1.0)},
        {
            "A": ("The  answer\tis 42.", 9.0),
            "B": ("the answer is 42. ", 2.0),
            "C": ("Maybe 41.", 5.0),
            "D": ("No idea.", 1.0),
        },
        {"A": ("ＡＢＣ first", 8.0), "B": ("abc FIRST", 1.0), "C": ("xyz", 4.0), "D": ("uvw", 2.0)},
    ]
    queries, responses, scores = [], [], []
    for n, answers in enumerate(cases):
        q, rs, ss = _judged(n, answers)
        queries.append(q)
        responses += rs
        scores += ss
    res = build_sets(queries, responses, scores, [], SetsConfig(margin=1.0, max_pairs_per_query=6, min_losers=2))
    assert res.stats["identical_answers_merged"] == 3  # one per query: B is A's twin
    assert res.pairwise and res.bon  # the merged answers still give items
    report = audit_release(release_of("t", [*res.pairwise, *res.bon]), near_duplicates=False, leak_patterns=[])
    assert report.counts["identical_pair"] == 0
    assert report.counts["unwinnable_bon"] == 0
    assert report.counts["contradiction"] == 0


def test_identity_rule():
    assert identity("Cafe\u0301") == identity("Caf\u00e9") == "caf\u00e9"
    assert identity(" a\u00a0\n b ") == "a b" and identity("STRASSE") == identity("straße")
    assert identity("a b") != identity("ab")


def test_search_text_is_the_user_turns():
    conv = (Turn("system", "sys"), Turn("user", "one"), Turn("assistant", "reply"), Turn("user", "two"))
    assert search_text(conv) == "one\n\ntwo"


def test_render_conversation_default_and_custom_formats():
    turns = [Turn("user", "hi"), ("assistant", "hello")]
    assert render_conversation(turns) == "[User]\nhi\n\n[Assistant]\nhello"
    assert (
        render_conversation(turns, fmt="{role}: {content}", roles={"user": "User", "assistant": "Agent"})
        == "User: hi\n\nAgent: hello"
    )


def test_fill_fills_once_and_never_rescans_inserted_text():
    out = fill("Q: {{ question }}\nA: {{answer}}\n", question="say {{answer}}", answer="{x} and {{question}}")
    assert out == "Q: say {{answer}}\nA: {x} and {{question}}"


def test_fill_raises_on_a_missing_value_and_does_not_escape():
    with pytest.raises(jinja2.UndefinedError):
        fill("{{ missing }}")
    assert fill("{{ x }}", x="<b>&</b>") == "<b>&</b>"


def test_display_cuts_long_text():
    assert display("short") == "short"
    assert display("x" * 300, 10) == "xxxxxxx..."
