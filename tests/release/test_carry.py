"""What a copy of a release carries besides its set files (``release/carry.py``); the copy from files is
tested end to end with ``rmb audit --fix`` in ``tests/commands/test_one_writer.py``."""

from __future__ import annotations

from pathlib import Path

from rmb_build.core.items import Turn
from rmb_build.release.carry import carry_parts
from rmb_build.release.read import Release
from rmb_build.release.style_set import StyleRecord, read_style_set


def _record(uid: str, scenario: str) -> StyleRecord:
    conversation = (Turn("user", f"q{uid}"),)
    return StyleRecord(uid, f"q{uid}", conversation, ("a", "b", "c"), ("d", "e", "f"), scenario, "", 0, scenario)


def test_a_release_read_in_its_hub_form_gets_its_style_records_written_less_the_removed_items(tmp_path: Path):
    """Read in the Hugging Face form, a release has no files: its ``style`` rows become Style_set/ files."""
    source = Release(name="hf", root=None, source_format="hf")
    source.style = [
        _record("1", "Harmlessness/S6"),
        _record("2", "Harmlessness/S6"),
        _record("3", "Helpfulness/Chat/Discussion"),
    ]
    carried = carry_parts(source, tmp_path, (), {("pairwise", "2")})
    assert carried.style_removed == 1
    assert sorted(carried.rewritten) == ["Style_set/Harmlessness/S6.json", "Style_set/Helpfulness/Chat/Discussion.json"]
    back = read_style_set(tmp_path)
    assert [(r.scenario_id, r.id, r.chosen) for r in back] == [
        ("Harmlessness/S6", "1", ("a", "b", "c")),
        ("Helpfulness/Chat/Discussion", "3", ("a", "b", "c")),
    ]
    assert "1 records of removed items dropped" in carried.summary()
