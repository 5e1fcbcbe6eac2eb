"""The card's trust section on label-set descriptions it cannot read as written."""

from __future__ import annotations

from rmb_build.release.card.trust import annotated_by


def test_an_annotated_by_that_is_not_a_name_is_said_unrecorded():
    # before: a list there (hand-written label set JSON) raised TypeError (unhashable) from the card
    assert annotated_by({"annotated_by": ["people"]}) == "a label set (who labelled it is not recorded)"
    assert annotated_by({"annotated_by": "people"}) == "people's labels"
    assert annotated_by(None) == "a label set (who labelled it is not recorded)"
