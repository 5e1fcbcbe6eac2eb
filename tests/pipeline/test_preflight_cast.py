"""Preflight checks on the cast: a judge that is one of the generators, or too few distinct generator
models, stops `rmb build` before any call with one line naming the file and the field, unless the
config relaxes the check; the manifest and the dataset card then say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from build_cli_helpers import refused_build

from rmb_build.core.errors import ConfigError
from rmb_build.pipeline.config import load_config, parse_config
from rmb_build.pipeline.manifest import cast_section
from rmb_build.pipeline.preflight import preflight

FOUR = [{"endpoint": "local", "model": m, "name": m} for m in ("m1", "m2", "m3")] + [
    {"endpoint": "remote", "model": "gpt-x", "name": "gpt-x"}
]


def _config(tmp_path: Path, **over) -> dict:
    src = tmp_path / "queries.jsonl"
    src.write_text(
        json.dumps(
            {"id": "1", "prompt": "Write a haiku about rain.", "scenario": "Helpfulness/Generation/Creative Writing"}
        )
        + "\n"
    )
    cfg = {
        "name": "t",
        "endpoints": {
            "local": {"embedded": "smollm2"},
            "remote": {"base_url": "http://127.0.0.1:9/v1"},
            "same-remote": {"base_url": "http://127.0.0.1:9/v1/"},
        },
        "sources": [{"kind": "jsonl", "path": str(src)}],
        "generators": FOUR,
        "judge": {"endpoint": "remote", "model": "judge-y"},
        "guard": {"endpoint": "local", "model": "smollm2"},
    }
    cfg.update(over)
    return cfg


def test_four_distinct_generators_and_another_judge_pass(tmp_path):
    cfg = parse_config(_config(tmp_path))
    assert preflight(cfg)[-1] == "release"
    assert cast_section(cfg).to_json() == {
        "distinct_generator_models": 4,
        "min_generators": 4,
        "allow_self_judging": False,
        "relaxed": [],
    }


def test_self_judging_stops_the_build(tmp_path, capsys):
    err = refused_build(tmp_path, _config(tmp_path, judge={"endpoint": "same-remote", "model": "gpt-x"}), capsys)
    assert "judge.model" in err and "generators[3]" in err and "allow_self_judging" in err


def test_self_judging_allowed_when_the_config_says_so(tmp_path):
    cfg = parse_config(_config(tmp_path, judge={"endpoint": "remote", "model": "gpt-x", "allow_self_judging": True}))
    preflight(cfg)
    assert cast_section(cfg).relaxed == ["judge.allow_self_judging is true: the judge also wrote the answers of gpt-x"]


def test_fewer_than_four_distinct_generator_models_stop_the_build(tmp_path, capsys):
    # three names, but two of them are one model behind two endpoint names for one server
    gens = [
        FOUR[0],
        {"endpoint": "remote", "model": "gpt-x", "name": "a"},
        {"endpoint": "same-remote", "model": "gpt-x", "name": "b"},
    ]
    err = refused_build(tmp_path, _config(tmp_path, generators=gens), capsys)
    assert "'generators'" in err and "2 distinct generator model(s)" in err and "min_generators" in err


def test_min_generators_relaxes_the_count(tmp_path):
    cfg = parse_config(_config(tmp_path, generators=FOUR[:2], min_generators=2))
    preflight(cfg)
    assert cast_section(cfg).relaxed == ["min_generators is 2 (default 4): the answers come from 2 distinct model(s)"]
    with pytest.raises(ConfigError, match="min_generators"):
        parse_config(_config(tmp_path, min_generators=0), "c.yaml")


def test_the_cast_is_only_checked_for_the_stages_that_run(tmp_path):
    cfg = parse_config(_config(tmp_path, generators=FOUR[:1], stages=["gather", "dedup", "classify"]))
    preflight(cfg)  # no generation: nothing to check
    judged_by_self = parse_config(
        _config(tmp_path, judge={"endpoint": "local", "model": "m1"}, min_generators=1, stages=["gather", "generate"])
    )
    preflight(judged_by_self)  # no judge stage: self-judging cannot happen
    with pytest.raises(ConfigError, match="judge.model"):
        judged_by_self.check_cast()


def test_the_demo_relaxes_both_checks_explicitly_and_its_card_says_so():
    from importlib import resources

    from rmb_build.release.card.selection import cast_checks
    from rmb_build.release.manifest_model import Manifest

    with resources.as_file(resources.files("rmb_build.pipeline") / "demo.yaml") as path:
        demo = load_config(path)
    preflight(demo)
    section = cast_section(demo)
    assert demo.min_generators == 1 and demo.judge.allow_self_judging
    assert len(section.relaxed) == 2
    card = cast_checks(Manifest(cast=section))
    assert "relaxed the checks" in card and "min_generators is 1" in card and "allow_self_judging" in card
