"""A misspelt config key is named, with the closest valid key at its own nesting level."""

from __future__ import annotations

import pytest
import yaml

from rmb_build.cli import main
from rmb_build.core.errors import ConfigError
from rmb_build.pipeline.config import parse_config

BASE = {
    "name": "t",
    "endpoints": {"local": {"embedded": "smollm2"}},
    "generators": [{"endpoint": "local", "model": "smollm2"}],
    "judge": {"endpoint": "local", "model": "smollm2"},
    "guard": {"endpoint": "local", "model": "smollm2"},
}

CASES = [
    ({"generater": BASE["generators"]}, ["generators"], "unknown key 'generater' (did you mean 'generators'?)"),
    ({"judge": {**BASE["judge"], "sampels": 3}}, [], "field 'judge': unknown key 'sampels' (did you mean 'samples'?)"),
    (
        {"generators": [{**BASE["generators"][0], "temprature": 1.0}]},
        [],
        "field 'generators[0]': unknown key 'temprature' (did you mean 'temperature'?)",
    ),
    (
        {"endpoints": {"local": {"base_ur": "http://127.0.0.1:1/v1"}}},
        [],
        "field 'endpoints.local': unknown key 'base_ur' (did you mean 'base_url'?)",
    ),
    (
        {
            "endpoints": {"api": {"base_url": "http://127.0.0.1:1/v1", "price_per_mtok": {"inptu": 1, "output": 2}}},
            "generators": [{"endpoint": "api", "model": "m"}],
            "judge": {"endpoint": "api", "model": "m"},
            "guard": {"endpoint": "api", "model": "m"},
        },
        [],
        "field 'endpoints.api.price_per_mtok': unknown key 'inptu' (did you mean 'input'?)",
    ),
    (
        {"sources": [{"kind": "jsonl", "pth": "q.jsonl"}]},
        [],
        "field 'sources[0]': unknown key 'pth' (did you mean 'path'?)",
    ),
    ({"zzzz": 1}, [], "unknown key 'zzzz'"),  # nothing close: no suggestion
]


@pytest.mark.parametrize(
    "over,drop,expected", CASES, ids=["top", "judge", "generator", "endpoint", "price", "source", "no-match"]
)
def test_unknown_key_names_the_closest_valid_key(over, drop, expected):
    data = {k: v for k, v in BASE.items() if k not in drop}
    data.update(over)
    with pytest.raises(ConfigError) as exc:
        parse_config(data, "c.yaml")
    assert str(exc.value) == f"c.yaml: {expected}"


def test_build_prints_the_suggestion_in_one_line(tmp_path, capsys):
    data = {k: v for k, v in BASE.items() if k != "generators"}
    data["generater"] = BASE["generators"]
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["build", "--config", str(path), "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"rmb build: error: {path}: unknown key 'generater' (did you mean 'generators'?)\n"
