"""One way to open an RMB release: ``rmb`` by name works wherever a release is read, not only in
``rmb evaluate``: ``rmb audit rmb``, ``rmb publish rmb --dry-run`` and ``judge.gold: {release: rmb}``
read the official release, downloaded once (here from a local archive at RMB_RELEASE_URL)."""

from __future__ import annotations

import asyncio
import json

import pytest
from formats_helpers import Server, archive_bytes

from rmb_build.benchmarks.fetch import URL_ENV
from rmb_build.cli import main
from rmb_build.llm.planning import PlanningClient
from rmb_build.pipeline.config import parse_config
from rmb_build.stages import gold


@pytest.mark.torch
def test_rmb_by_name_opens_the_official_release_everywhere(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with Server(archive_bytes(tmp_path)) as server:
        monkeypatch.setenv(URL_ENV, server.url)
        assert main(["audit", "rmb", "--no-embeddings", "--json", str(tmp_path / "audit.json")]) == 0
        audit = json.loads((tmp_path / "audit.json").read_text())
        assert audit["release"] == "rmb" and "counts" in audit
        code = main(
            [
                "publish",
                "rmb",
                "--repo-id",
                "org/rmb-copy",
                "--dry-run",
                "--out",
                str(tmp_path / "hf"),
                "--no-embeddings",
                "--license",
                "cc-by-4.0",
            ]
        )
        assert code == 0, capsys.readouterr().err
        assert (tmp_path / "hf" / "README.md").is_file() and any((tmp_path / "hf").rglob("*.parquet"))
        cfg = parse_config(
            {
                "name": "g",
                "endpoints": {"e": {"base_url": "http://127.0.0.1:9/v1"}},
                "generators": [{"endpoint": "e", "model": "m"}],
                "judge": {"endpoint": "e", "model": "j", "samples": 1, "gold": {"release": "rmb", "items": 2}},
                "guard": {"endpoint": "e", "model": "g"},
            }
        )
        planner = PlanningClient(cfg.endpoints)  # records the gold check's requests, sends nothing (as --dry-run)
        asyncio.run(gold.gold_check(cfg, planner))
        planned = [call.request for call in planner.calls.values()]
        assert server.requests == 1  # downloaded once, then read from the user cache
    assert planned and any("hello there" in json.dumps(r.messages) for r in planned)
