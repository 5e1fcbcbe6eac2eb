"""The malformed-input corpus in tests/bad_inputs/: exact inputs fail with one clear error naming the
file, the item and the field; nothing else is raised."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmb_build.core.errors import ConfigError, InputError
from rmb_build.pipeline.config import load_config
from rmb_build.release import read_release

CORPUS = Path(__file__).parent / "bad_inputs"

# file -> (where it is placed in a release, what the error must name)
RELEASE_CASES = {
    "invalid_json.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "line 11: invalid JSON: Expecting ':' delimiter",
    ),
    "truncated_json.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "truncated JSON"),
    "invalid_utf8.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "line 6: invalid UTF-8"),
    "missing_answer.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "item 1 (uid 2): field 'chosen.answer': missing",
    ),
    "missing_reject.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "item 0 (uid 1): field 'reject': missing"),
    "mistyped_uid.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'pair_uid': expected a string or integer uid, got list",
    ),
    "empty_conversation.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input': empty conversation",
    ),
    "ends_with_assistant.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "ends with a 'assistant' turn"),
    "non_string_content.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input[0].content': expected a string, got dict",
    ),
    "unknown_role.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input[0].role': unknown role 'bot'",
    ),
    "language_not_string.json": (
        "Pairwise_set/Helpfulness/Chat/Discussion.json",
        "field 'conversation_input[0].language'",
    ),
    "not_a_list.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "expected a JSON list of items, got dict"),
    "item_not_object.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "item 1: expected an object, got str"),
    "answer_not_object.json": ("Pairwise_set/Helpfulness/Chat/Discussion.json", "field 'reject': expected an object"),
    "bon_no_losers.json": ("BoN_set/Harmlessness/S1.json", "item 0 (uid 7): field 'loser_list': empty"),
    "bon_losers_not_list.json": ("BoN_set/Harmlessness/S1.json", "field 'loser_list': expected a list"),
    "bon_loser_missing_answer.json": ("BoN_set/Harmlessness/S1.json", "field 'loser_list[1].answer': missing"),
    "unknown_scenario.json": (
        "Pairwise_set/Helpfulness/Chat/Gossip.json",
        "unknown scenario 'Helpfulness/Chat/Gossip'",
    ),
}


def test_corpus_is_complete():
    assert sorted(p.name for p in (CORPUS / "release").iterdir()) == sorted(RELEASE_CASES)
    assert len(RELEASE_CASES) + len(list((CORPUS / "config").iterdir())) >= 20


@pytest.mark.parametrize("name", sorted(RELEASE_CASES))
def test_bad_release_file(tmp_path: Path, name: str):
    place, expected = RELEASE_CASES[name]
    target = tmp_path / "release" / place
    target.parent.mkdir(parents=True)
    shutil.copy(CORPUS / "release" / name, target)
    with pytest.raises(InputError) as exc:
        read_release(tmp_path / "release")
    message = str(exc.value)
    assert message.startswith(place), message
    assert expected in message, message
    assert "\n" not in message


@pytest.mark.parametrize("path", sorted((CORPUS / "config").glob("*.yaml")), ids=lambda p: p.stem)
def test_bad_config(path: Path):
    expected = path.read_text().splitlines()[0].removeprefix("# expect: ")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value).startswith(str(path)), exc.value
    assert expected in str(exc.value), exc.value


def test_scenario_path_traversal_is_refused(tmp_path: Path):
    # A set file cannot sit outside its folder, but a scenario id with '..' or a backslash can arrive
    # through other forms; the writer and reader refuse it before using it as a path.
    from rmb_build.core.paths import check_relative_id

    for bad in ("../etc/passwd", "Helpfulness/../../x", "/abs", "a\\b", "Harmlessness/ S1"):
        with pytest.raises(ValueError):
            check_relative_id(bad)
    assert check_relative_id("Helpfulness/Chat/Discussion") == "Helpfulness/Chat/Discussion"


def test_five_megabyte_answer_is_valid(tmp_path: Path):
    item = {
        "pair_uid": "1",
        "conversation_input": [{"content": "hi", "role": "user"}],
        "chosen": {"llm_name": "a", "answer": "word " * 1_000_000},
        "reject": {"llm_name": "b", "answer": "y"},
        "category_path": "Pairwise_set/Helpfulness/Chat/Discussion",
    }
    path = tmp_path / "Pairwise_set/Helpfulness/Chat/Discussion.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([item], indent=1))
    release = read_release(tmp_path)
    assert len(release.pairwise[0].chosen.answer) == 5_000_000
