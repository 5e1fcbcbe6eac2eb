"""The build on a real Dask cluster: ``run: {task_runner: dask}`` against a ``distributed.LocalCluster``
of two worker processes gives the same release, byte for byte, as the thread runner from the same LLM
cache (the scripted stub endpoint answers the LLM calls: this is about the runner, not the model)."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
import yaml
from reliability_helpers import NAME, build_config, prefect_api, release_files, run_build, write_queries  # noqa: F401
from stub_endpoint import StubEndpoint

# Whether Dask and prefect-dask are installed, without importing them: a module of the slow tier that the quick
# tier only collects, where importing them cost each worker about 3 s of CPU.
for _module, _reason in (
    ("distributed", "Dask is not installed (pip install 'rmb_build[dask]')"),
    ("prefect_dask", "prefect-dask is not installed (pip install 'rmb_build[dask]')"),
):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(_reason, allow_module_level=True)

pytestmark = pytest.mark.slow

STAGES = ["gather", "dedup", "classify", "generate", "judge", "guard", "build_sets", "release"]


def _config(tmp_path, base_url, runner: dict) -> object:
    source = tmp_path / "queries.jsonl"
    if not source.exists():
        write_queries(source)
    cfg = build_config(source, base_url)
    cfg["stages"] = STAGES
    cfg["run"] = {"batch_size": 2, **runner}
    path = tmp_path / f"{runner['task_runner']}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _comparable(files: dict[str, bytes]) -> dict[str, object]:
    """The release's files; the manifest without what differs between any two runs (times, spend, encoding, runner)."""
    out: dict[str, object] = dict(files)
    manifest = json.loads(out.pop("manifest.json"))
    for key in ("created", "stages", "usage", "embeddings"):
        manifest.pop(key, None)
    manifest.get("config", {}).pop("run", None)
    out["manifest.json"] = manifest
    return out


def test_dask_cluster_build_equals_thread_build(tmp_path, prefect_api, monkeypatch):
    import distributed

    # Workers report their task runs to the same Prefect server as the flow.
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    with StubEndpoint() as stub:
        thread_work = tmp_path / "thread"
        run_build(_config(tmp_path, stub.base_url, {"task_runner": "thread"}), thread_work, prefect_api, timeout=600)
        calls = stub.count()
        assert calls > 0

        dask_work = tmp_path / "dask"
        shutil.copytree(thread_work / "runs" / NAME / "llm_cache", dask_work / "runs" / NAME / "llm_cache")
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            config = _config(
                tmp_path, stub.base_url, {"task_runner": "dask", "dask_address": cluster.scheduler_address}
            )
            run = run_build(config, dask_work, prefect_api, timeout=600)
            # the CPU stages (embedding batches, dedup, classify batches) really ran as tasks of the cluster
            prefixes = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
            assert {"embed_task", "dedup_task", "classify_task"} <= set(prefixes), (prefixes, run.output()[-3000:])
        assert stub.count() == calls, "the Dask build made LLM calls the shared cache already held"

    release = ("data", "release", NAME)
    thread_files = release_files(thread_work.joinpath(*release))
    dask_files = release_files(dask_work.joinpath(*release))
    assert any(k.endswith(".json") and k.startswith("Pairwise_set/") for k in thread_files)
    assert _comparable(dask_files) == _comparable(thread_files)
    # Each text embedded once on the cluster too: the workers shared the embedding batches (the
    # classifier's training examples included) instead of each encoding what it needed.
    embeddings = json.loads(dask_files["manifest.json"])["embeddings"]
    assert embeddings["encoded"] == embeddings["distinct_texts"], embeddings
