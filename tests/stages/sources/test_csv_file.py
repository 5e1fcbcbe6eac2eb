"""The ``csv`` source kind: rows become queries, a malformed row is quarantined, preflight sees a missing file."""

from __future__ import annotations

import pytest

from rmb_build.core.errors import ConfigError
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.preflight import check_sources
from rmb_build.stages.gather import gather
from rmb_build.stages.options import source_config


def test_csv_rows_become_queries_and_a_long_row_is_quarantined(tmp_path):
    path = tmp_path / "prompts.csv"
    path.write_text('id;prompt\n1;"How do tides work?"\n2;"Name, please;"\n3;too;many\n4;Why is the sky blue?\n')
    src = source_config(kind="csv", path=str(path), delimiter=";")
    res = gather([src], quarantine_path=tmp_path / "q.jsonl")
    assert [q.source_id for q in res.queries] == ["1", "2", "4"]
    assert res.queries[1].prompt == "Name, please;" and res.queries[0].source == "csv:prompts.csv"
    stats = res.stats["csv:prompts.csv"]
    assert stats["read"] == 4 and stats["quarantined"] == 1
    assert "more cells than the header" in (tmp_path / "q.jsonl").read_text()


def test_csv_source_in_a_config_is_checked_before_work(tmp_path):
    data = {
        "name": "t",
        "endpoints": {"local": {"embedded": "smollm2"}},
        "generators": [{"endpoint": "local", "model": "smollm2"}],
        "judge": {"endpoint": "local", "model": "smollm2"},
        "guard": {"endpoint": "local", "model": "smollm2"},
        "sources": [{"kind": "csv", "path": str(tmp_path / "absent.csv")}],
    }
    with pytest.raises(ConfigError, match=r"sources\[0\]\.path.*no such file"):
        check_sources(parse_config(data))
    data["sources"][0]["delimiter"] = ";;"
    with pytest.raises(ConfigError, match=r"sources\[0\]\.delimiter"):
        parse_config(data)
