"""The build core's output pinned: a fixed stub build writes these exact bytes.

The digests were computed from the code before issue 39's refactor of the build core (one spec per
stage, one run context): a change that moves code without changing behaviour keeps them. A change
that means to alter the items or the annotations updates them, and says why.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from reliability_helpers import build_config, write_queries
from stub_endpoint import StubEndpoint

from rmb_build.pipeline.config import parse_config

# relative path -> sha256 of the file, from the code before the refactor (commit fb24d12)
PINNED: dict[str, str] = {
    "BoN_set/Harmlessness/S6.json": "e8b898ed299b604bcc4c6536f8a0758d098c2a45669a547d7bb529203554a8de",
    "BoN_set/Helpfulness/Code/Development and Implementation.json": "efa645ab6a52faa2fa5e4b7002a28b8760f5258b0397764233d524bd528b9523",
    "BoN_set/Helpfulness/Generation/Creative Writing.json": "8cdabd762cb85ae80b11c622b1dc8466f17f34de10d6b86f0a513d4700dd66ef",
    "BoN_set/Helpfulness/Open QA/Factual.json": "42600e64eb35d4ca14c52dc791b7562cbda130c68fef71213f516438017a26e1",
    "Pairwise_set/Harmlessness/S6.json": "4866084802cafeb0f633d5082a6a4bb0023b5649749932c22691e19ddc3308cb",
    "Pairwise_set/Helpfulness/Code/Development and Implementation.json": "319c9d2177c24e0fba25994a79bbbf0d9c71946d52ad45a2513d93f5522a42a8",
    "Pairwise_set/Helpfulness/Generation/Creative Writing.json": "6a113bca693774ed544ddf9599ad173d7ed540a572e46424cbfcbb55dc47f03d",
    "Pairwise_set/Helpfulness/Open QA/Factual.json": "64d6341baa7d7e0bc426ac8304e70661fc6abef07f13f0bf2f0ff83bdd0796e2",
    "annotations.jsonl": "d0fc171a5fe9d11cd3918542012e1d273deb19e1ff8728b97029012e2e1e5d7f",
}


def pinned_files(release: Path) -> dict[str, str]:
    """sha256 of every file under Pairwise_set/ and BoN_set/, and of annotations.jsonl."""
    files = [p for d in ("Pairwise_set", "BoN_set") for p in (release / d).rglob("*") if p.is_file()]
    files.append(release / "annotations.jsonl")
    return {p.relative_to(release).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


def stub_build(tmp_path: Path, runner: str) -> Path:
    from rmb_build.pipeline.run import run_build

    with StubEndpoint() as stub:
        raw = build_config(write_queries(tmp_path / "queries.jsonl"), stub.base_url)
        out = run_build(parse_config(raw), tmp_path / "work", runner=runner)
    return Path(out["release"])


@pytest.mark.torch
def test_a_stub_build_writes_the_pinned_bytes_on_the_local_runner(tmp_path):
    assert pinned_files(stub_build(tmp_path, "local")) == PINNED


@pytest.mark.slow
def test_a_stub_build_writes_the_pinned_bytes_on_prefect(tmp_path, prefect_harness):
    assert pinned_files(stub_build(tmp_path, "prefect")) == PINNED
