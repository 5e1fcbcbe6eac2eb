"""`rmb build` refuses a config that cannot run before Prefect, a model or any file write starts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from build_cli_helpers import refused_build

from rmb_build.core.errors import ConfigError
from rmb_build.pipeline.config import RunConfig, parse_config
from rmb_build.pipeline.preflight import check_stages, preflight


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
        "endpoints": {"local": {"embedded": "smollm2"}},
        "sources": [{"kind": "jsonl", "path": str(src)}],
        "generators": [{"endpoint": "local", "model": "smollm2", "name": "a"}],
        "min_generators": 1,
        "judge": {"endpoint": "local", "model": "smollm2", "allow_self_judging": True},
        "guard": {"endpoint": "local", "model": "smollm2"},
    }
    cfg.update(over)
    return cfg


@pytest.mark.parametrize(
    "over, field",
    [
        ({"stages": ["gather", "dedupe"]}, "stages"),
        ({"scenarios": ["Helpfulness/Chat/Gossip"]}, "scenarios"),
        ({"judge": {"endpoint": "remote", "model": "m"}}, "judge.endpoint"),
        (
            {
                "generators": [
                    {"endpoint": "local", "model": "smollm2", "name": "a"},
                    {"endpoint": "local", "model": "smollm2", "name": "a"},
                ]
            },
            "generators[1].name",
        ),
        (
            {
                "generators": [
                    {"endpoint": "local", "model": "smollm2", "name": "a"},
                    {"endpoint": "local", "model": "smollm2", "name": "b", "stop": ["\n"]},
                ]
            },
            "generators[1].stop",
        ),
    ],
)
def test_config_errors_name_the_field(tmp_path, capsys, over, field):
    err = refused_build(tmp_path, _config(tmp_path, **over), capsys)
    assert field in err


def test_unreadable_and_missing_sources(tmp_path, capsys):
    err = refused_build(
        tmp_path, _config(tmp_path, sources=[{"kind": "jsonl", "path": str(tmp_path / "nope.jsonl")}]), capsys
    )
    assert "sources[0].path" in err and "nope.jsonl" in err
    err = refused_build(tmp_path, _config(tmp_path, sources=[{"kind": "parquet"}]), capsys)
    assert "sources[0].path" in err
    err = refused_build(tmp_path, _config(tmp_path, sources=[]), capsys)
    assert "'sources'" in err
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.jsonl"
        locked.write_text("{}\n")
        locked.chmod(0)
        err = refused_build(tmp_path, _config(tmp_path, sources=[{"kind": "jsonl", "path": str(locked)}]), capsys)
        assert "sources[0].path" in err and "not readable" in err


def test_release_source_must_be_a_release(tmp_path, capsys):
    err = refused_build(tmp_path, _config(tmp_path, sources=[{"kind": "rmb_release", "path": str(tmp_path)}]), capsys)
    assert "sources[0].path" in err and "not an RMB release" in err


def test_remote_endpoint_needs_its_key_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RMB_TEST_MISSING_KEY", raising=False)
    cfg = _config(
        tmp_path,
        endpoints={
            "local": {"embedded": "smollm2"},
            "remote": {"base_url": "https://api.example.com/v1", "api_key_env": "RMB_TEST_MISSING_KEY"},
        },
        judge={"endpoint": "remote", "model": "gpt-x"},
    )
    err = refused_build(tmp_path, cfg, capsys)
    assert "endpoints.remote.api_key_env" in err and "RMB_TEST_MISSING_KEY" in err
    monkeypatch.setenv("RMB_TEST_MISSING_KEY", "sk-test-secret")
    preflight(parse_config(cfg))  # set: passes, and the value is never echoed anywhere


def test_the_style_stages_remote_endpoint_needs_its_key_variable(tmp_path, monkeypatch):
    """Every endpoint a stage's spec names (``StageSpec.endpoints``) is checked, the style stage's rewriter too."""
    monkeypatch.delenv("RMB_TEST_MISSING_KEY", raising=False)
    cfg = _config(
        tmp_path,
        endpoints={
            "local": {"embedded": "smollm2"},
            "rewriter": {"base_url": "https://api.example.com/v1", "api_key_env": "RMB_TEST_MISSING_KEY"},
        },
        style={"endpoint": "rewriter", "model": "gpt-x"},
    )
    with pytest.raises(
        ConfigError, match=r"^b\.yaml: field 'endpoints\.rewriter\.api_key_env': .*RMB_TEST_MISSING_KEY"
    ):
        preflight(parse_config(cfg), "b.yaml")


def test_unused_remote_endpoint_needs_no_key(tmp_path, monkeypatch):
    monkeypatch.delenv("RMB_TEST_MISSING_KEY", raising=False)
    cfg = _config(
        tmp_path,
        endpoints={
            "local": {"embedded": "smollm2"},
            "spare": {"base_url": "https://api.example.com/v1", "api_key_env": "RMB_TEST_MISSING_KEY"},
        },
    )
    assert preflight(parse_config(cfg))[-1] == "release"


def test_stage_list_rules(tmp_path):
    base = _config(tmp_path)
    assert check_stages(parse_config({**base, "stages": ["gather", "generate", "judge", "guard", "build_sets"]})) == [
        "gather",
        "generate",
        "judge",
        "guard",
        "build_sets",
    ]
    assert check_stages(parse_config({**base, "stages": ["gather", "dedup"]})) == ["gather", "dedup"]
    with pytest.raises(ConfigError, match="'generate' is missing"):
        check_stages(parse_config({**base, "stages": ["gather", "judge"]}))


def test_dask_runner_without_prefect_dask_is_a_config_error(tmp_path):
    pytest.importorskip("prefect")
    from importlib.util import find_spec

    from rmb_build.pipeline.prefect_task_runner import make_task_runner

    assert type(make_task_runner(RunConfig())).__name__ == "ThreadPoolTaskRunner"
    cfg = parse_config(_config(tmp_path, run={"task_runner": "dask", "dask_address": "tcp://127.0.0.1:8786"}))
    if find_spec("prefect_dask") is None:
        with pytest.raises(ConfigError, match="run.task_runner"):
            preflight(cfg)
        with pytest.raises(ConfigError, match="prefect-dask"):
            make_task_runner(cfg.run)
    else:
        runner = make_task_runner(cfg.run)
        assert type(runner).__name__ == "DaskTaskRunner"


def test_dask_runner_names_the_dask_extra_where_prefect_dask_is_absent(tmp_path, monkeypatch):
    """prefect-dask is the dask extra's, not the build extra's: both checks of run.task_runner: dask say, in one
    line, which extra installs it (rmb_build.core.extras' install line)."""
    pytest.importorskip("prefect")
    import importlib.util

    from rmb_build.core.extras import install_line
    from rmb_build.pipeline.prefect_task_runner import make_task_runner

    cfg = parse_config(_config(tmp_path, run={"task_runner": "dask", "dask_address": "tcp://127.0.0.1:8786"}))
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "prefect_dask" else find_spec(name, *a)
    )
    monkeypatch.setitem(sys.modules, "prefect_dask", None)  # its import fails as where it is not installed
    for check in (lambda: preflight(cfg), lambda: make_task_runner(cfg.run)):
        with pytest.raises(ConfigError) as err:
            check()
        message = str(err.value)
        assert "\n" not in message and "run.task_runner" in message, message
        assert "prefect-dask" in message and install_line("dask") in message, message


def test_embedded_servers_are_capped_by_the_machine(tmp_path, capsys, monkeypatch):
    import rmb_build.core.machine as machine

    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    cfg = _config(tmp_path, endpoints={"local": {"embedded": "smollm2", "servers": 8}})
    err = refused_build(tmp_path, cfg, capsys)
    assert "endpoints.local.servers" in err and "8 embedded servers on 2 usable cores: give at most 2" in err
    cfg["endpoints"]["local"]["servers"] = 2
    assert preflight(parse_config(cfg))[-1] == "release"
