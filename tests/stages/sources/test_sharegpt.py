"""The streaming JSON-array reader on cut-off files, and gathering the packaged ShareGPT dump."""

from __future__ import annotations

import json

import pytest

from rmb_build.core.errors import InputError
from rmb_build.core.json_array import ArrayTail, iter_json_array
from rmb_build.stages.gather import gather
from rmb_build.stages.language import detect_language
from rmb_build.stages.options import source_config
from rmb_build.stages.sources.sharegpt import packaged_sharegpt

RECORDS = [
    {
        "id": f"r{n}",
        "conversations": [
            {"from": "human", "value": f'question {n} \u00e9\u4e2d "q" [x]'},
            {"from": "gpt", "value": "answer } ] ,"},
        ],
    }
    for n in range(6)
]


@pytest.mark.parametrize("chunk", [3, 17, 1 << 20])
def test_whole_array_in_any_chunk_size(tmp_path, chunk):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(RECORDS, indent=2, ensure_ascii=False), encoding="utf-8")
    tail = ArrayTail()
    assert [r for _, r in iter_json_array(path, tail, chunk_chars=chunk)] == RECORDS
    assert tail.complete and tail.incomplete_chars == 0


def test_every_cut_position_keeps_exactly_the_complete_records(tmp_path):
    text = json.dumps(RECORDS, indent=1, ensure_ascii=False)
    ends = []  # where each record's closing brace ends, found independently with raw_decode
    decoder, pos = json.JSONDecoder(), text.index("{")
    for _ in RECORDS:
        _, pos = decoder.raw_decode(text, pos)
        ends.append(pos)
        pos = text.find("{", pos)
    path = tmp_path / "cut.json"
    for cut in range(1, len(text) - 1, 7):
        path.write_text(text[:cut], encoding="utf-8")
        tail = ArrayTail()
        got = [r for _, r in iter_json_array(path, tail, chunk_chars=64)]
        assert got == RECORDS[: sum(e <= cut for e in ends)], cut
        assert not tail.complete


def test_invalid_json_inside_the_array_names_the_item_and_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[\n{"id": 1},\n{"id": 2, oops},\n{"id": 3}\n]', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.json: line 3: item 1: invalid JSON"):
        list(iter_json_array(path, chunk_chars=8))


def test_packaged_sharegpt_is_cut_off_after_17671_complete_records():
    tail = ArrayTail()
    with packaged_sharegpt() as path:
        count = sum(1 for _ in iter_json_array(path, tail))
    assert count == 17671
    assert not tail.complete and tail.incomplete_chars > 0


def test_gather_sharegpt_makes_rmb_shaped_queries(tmp_path):
    res = gather([source_config(kind="sharegpt", max_turns=5, limit=300)], quarantine_path=tmp_path / "q.jsonl")
    stats = res.stats["sharegpt"]
    assert stats["kept"] == len(res.queries) == 300
    assert stats["read"] == stats["kept"] + stats["filtered"] + stats["quarantined"]
    assert stats["filtered"] > 0  # chat parts that start with the assistant (ShareGPT split long chats)
    for q in res.queries:
        roles = [t.role for t in q.conversation if t.role != "system"]
        assert len(roles) in (1, 3, 5) and roles[-1] == "user"
        assert q.source == "sharegpt" and q.source_id and q.conversation[-1].content.strip()
    assert len({q.id for q in res.queries}) == 300
    assert {len(q.conversation) for q in res.queries} >= {1, 3, 5}


def test_language_heuristic():
    assert detect_language("How do I sort a list in Python?") == "English"
    assert detect_language("¿Cómo puedo aprender a programar en la universidad?") == "Spanish"
    assert detect_language("请帮我把这段话翻译成英文") == "Chinese"
    assert detect_language("この文章を英語に翻訳してください") == "Japanese"
    assert detect_language("Переведи этот текст на английский") == "Russian"
    assert detect_language("1234 !!!") is None
