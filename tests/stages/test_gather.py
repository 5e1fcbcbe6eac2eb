"""gather: every source kind into Query records, filters, quarantine, stats and the queries file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmb_build.core.errors import InputError
from rmb_build.core.records import Query, query_id
from rmb_build.stages.gather import gather, read_queries, write_queries
from rmb_build.stages.options import source_config

ROWS = [
    {"id": "a", "prompt": "What is the capital of France?"},
    {
        "id": "b",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime number."}],
    },
    {
        "id": "c",
        "conversations": [
            {"from": "human", "value": "Hi, write a haiku about rain."},
            {"from": "gpt", "value": "Rain on the window..."},
            {"from": "human", "value": "Now one about snow."},
            {"from": "gpt", "value": "Snow falls..."},
        ],
    },
    {
        "id": "d",
        "messages": [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}],
    },  # not alternating
    {"id": "e", "prompt": "ok"},  # too short
    {"id": "f", "prompt": "¿Cuál es la capital de España y por qué es tan famosa por su cultura?"},  # Spanish
    {"id": "g", "messages": [{"role": "assistant", "content": "Hello! How can I help?"}]},  # starts with assistant
    {"id": "h", "instruction": "Summarise the text.", "input": "The cat sat on the mat all day long."},
]


def _jsonl(path: Path, rows: list, broken_line: bool = False) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    if broken_line:
        lines.insert(2, '{"id": "broken", "prompt": ')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_records_become_queries_with_filters_and_quarantine(tmp_path):
    src = source_config(
        kind="jsonl", path=str(_jsonl(tmp_path / "q.jsonl", ROWS, broken_line=True)), min_chars=5, languages=["English"]
    )
    res = gather([src], quarantine_path=tmp_path / "quarantine.jsonl")
    by_id = {q.source_id: q for q in res.queries}
    assert sorted(by_id) == ["a", "b", "c", "h"]
    assert [t.role for t in by_id["b"].conversation] == ["system", "user"]
    # a ShareGPT-style chat ending with the assistant is cut to end with its last user turn
    assert [t.content for t in by_id["c"].conversation][-1] == "Now one about snow."
    assert len(by_id["c"].conversation) == 3
    assert by_id["h"].prompt == "Summarise the text.\n\nThe cat sat on the mat all day long."
    q = by_id["a"]
    assert q.source == "jsonl:q.jsonl" and q.id == query_id("jsonl:q.jsonl", "a")
    assert q.language == "English" and q.conversation[-1].language == "English"
    stats = res.stats["jsonl:q.jsonl"]
    assert stats["read"] == 9 and stats["kept"] == 4
    assert stats["quarantined"] == 2 and stats["filtered"] == 3  # d + broken; e, f, g
    assert stats["incomplete_tail"] == 0
    quarantined = [json.loads(line) for line in (tmp_path / "quarantine.jsonl").read_text().splitlines()]
    reasons = {r["where"]: r["reason"] for r in quarantined}
    assert reasons[3].startswith("invalid JSON")  # the broken line, by its line number
    assert "roles must alternate" in reasons[5]
    assert any(r["record"] == ROWS[3] for r in quarantined)


def test_max_turns_cuts_to_a_prefix_ending_with_a_user_turn(tmp_path):
    turns = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k}"} for k in range(8)]
    path = _jsonl(tmp_path / "t.jsonl", [{"id": 1, "messages": turns}])
    for max_turns, expected in [(None, 7), (5, 5), (4, 3), (1, 1)]:
        (q,) = gather([source_config(kind="jsonl", path=str(path), max_turns=max_turns)]).queries
        assert len(q.conversation) == expected and q.conversation[-1].role == "user"


def test_field_mapping_max_chars_scenario_labels_skip_and_limits(tmp_path):
    rows = [
        {
            "qid": f"r{n}",
            "body": f"Please explain topic number {n} in detail.",
            "label": "Helpfulness/Open QA/General Explanation",
        }
        for n in range(6)
    ]
    rows.append({"qid": "bad-label", "body": "Explain something else entirely.", "label": "Helpfulness/Nope"})
    rows.append({"qid": "long", "body": "x " * 500, "label": "Helpfulness/Open QA/Factual"})
    path = _jsonl(tmp_path / "mapped.jsonl", rows)
    fields = {"id": "qid", "prompt": "body", "scenario": "label"}
    res = gather([source_config(kind="jsonl", path=str(path), fields=fields, max_chars=200)])
    assert [q.source_id for q in res.queries] == [f"r{n}" for n in range(6)]
    assert {q.scenario_id for q in res.queries} == {"Helpfulness/Open QA/General Explanation"}
    stats = res.stats["jsonl:mapped.jsonl"]
    assert stats["quarantined"] == 1 and stats["filtered"] == 1
    assert any("not one of the 49" in r for r in stats["reasons"])

    skipped = gather([source_config(kind="jsonl", path=str(path), fields=fields, skip=2, limit=3)])
    assert [q.source_id for q in skipped.queries] == ["r2", "r3", "r4"]
    # a record two sources read is gathered once (the second filters it); the build's limit caps the total
    first_three = source_config(kind="jsonl", path=str(path), fields=fields, limit=3)
    two_sources = gather([first_three, source_config(kind="jsonl", path=str(path), fields=fields)], limit=5)
    assert [q.source_id for q in two_sources.queries] == [f"r{n}" for n in range(5)] and len(two_sources.stats) == 2
    assert two_sources.stats["jsonl:mapped.jsonl#1"]["reasons"]["already gathered from an earlier source"] == 3

    missing = gather([source_config(kind="jsonl", path=str(path), fields={"prompt": "nope"})])
    assert not missing.queries and "no field 'nope'" in next(iter(missing.stats.values()))["reasons"]


def test_ids_are_stable_and_duplicate_source_ids_are_quarantined(tmp_path):
    path = _jsonl(
        tmp_path / "dup.jsonl", [{"id": 7, "prompt": "First question here?"}, {"id": 7, "prompt": "Second question?"}]
    )
    a = gather([source_config(kind="jsonl", path=str(path))])
    b = gather([source_config(kind="jsonl", path=str(path))])
    assert [q.id for q in a.queries] == [q.id for q in b.queries] and len(a.queries) == 1
    assert a.stats["jsonl:dup.jsonl"]["quarantined"] == 1


@pytest.mark.torch
def test_json_array_parquet_and_hf_sources(tmp_path):
    import datasets

    rows = [r for r in ROWS if "prompt" in r or "messages" in r]
    (tmp_path / "rows.json").write_text(json.dumps(rows), encoding="utf-8")
    flat = [{"id": f"p{n}", "prompt": f"Question number {n}: what is {n} squared?"} for n in range(5)]
    hf_dir = tmp_path / "hf_dataset"
    hf_dir.mkdir()
    datasets.Dataset.from_list(flat).to_parquet(str(hf_dir / "train.parquet"))
    from_json = gather([source_config(kind="json", path=str(tmp_path / "rows.json"))])
    assert [q.source_id for q in from_json.queries] == ["a", "b", "e", "f"]  # d malformed, g starts with the assistant
    for src in (
        source_config(kind="parquet", path=str(hf_dir / "train.parquet")),
        source_config(kind="parquet", path=str(hf_dir)),
        source_config(kind="hf", path=str(hf_dir), streaming=True),
        source_config(kind="hf", path=str(hf_dir), streaming=False),
        source_config(kind="hf", path=str(hf_dir / "train.parquet")),
    ):
        res = gather([src])
        assert [q.source_id for q in res.queries] == [f"p{n}" for n in range(5)], src
        assert res.queries[2].prompt == "Question number 2: what is 2 squared?"


def test_rmb_release_source_keeps_labels(rmb_sample):
    res = gather([source_config(kind="rmb_release", path=str(rmb_sample))])
    assert len(res.queries) == 218  # distinct conversations of the ten sample files
    assert all(q.scenario_id and q.conversation[-1].role == "user" for q in res.queries)
    assert {q.source_id.split(":")[0] for q in res.queries} <= {"pairwise", "bon"}
    english = gather([source_config(kind="rmb_release", path=str(rmb_sample), languages=["English"], limit=20)])
    assert len(english.queries) == 20 and all(q.language in (None, "English") for q in english.queries)


@pytest.mark.torch
def test_unreadable_sources_name_the_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        gather([source_config(kind="jsonl", path=str(tmp_path / "absent.jsonl"))])
    (tmp_path / "obj.json").write_text('{"not": "an array"}')
    with pytest.raises(InputError, match="obj.json.*expected a JSON array"):
        gather([source_config(kind="json", path=str(tmp_path / "obj.json"))])
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="bad.parquet.*Parquet"):
        gather([source_config(kind="parquet", path=str(tmp_path / "bad.parquet"))])
    with pytest.raises(InputError, match="someorg/absent-dataset: field 'path': cannot load the dataset"):
        gather([source_config(kind="hf", path="someorg/absent-dataset")])  # offline in tests: unreachable
    (tmp_path / "latin1.jsonl").write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(InputError, match="latin1.jsonl: line 1: invalid UTF-8"):
        gather([source_config(kind="jsonl", path=str(tmp_path / "latin1.jsonl"))])


def test_queries_file_round_trip_and_bad_lines(tmp_path):
    path = _jsonl(tmp_path / "in.jsonl", ROWS)
    queries = gather([source_config(kind="jsonl", path=str(path))]).queries
    out = tmp_path / "raw" / "queries.jsonl"
    write_queries(queries, out)
    assert read_queries(out) == queries
    assert all(isinstance(q, Query) for q in read_queries(out))
    out.write_text(out.read_text() + '{"id": "x"}\n')
    with pytest.raises(InputError, match=rf"line {len(queries) + 1}: field 'conversation'"):
        read_queries(out)
