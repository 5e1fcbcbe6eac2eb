"""Prefect's share of a small build's wall time: the embedded demo cut down to fit about 3 minutes.

One fresh build (new work folder, so nothing is cached) of ShareGPT queries through every stage on
the embedded SmolLM2, with small batches so that there are many task runs. Its wall time splits into
- ``work_s``: time during which some stage's own work was running (the union of the task bodies'
  spans, from ``runs/<name>/summary.json``: LLM batches run concurrently, so their seconds overlap);
- ``overhead_s``: everything else: Prefect's temporary server start, flow and task run bookkeeping,
  result persistence, plus the flow's glue (selection, writing the release).
``overhead_fraction`` = overhead_s / wall_s (goal under 0.1); ``overhead_fraction_warm`` leaves out
the temporary server's start (a long-running Prefect server pays it once, not per build).
Prints a table, then one JSON line. Usage: python bench/orchestration.py [--queries 6] [--batch-size 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bench_config(queries: int, batch_size: int) -> dict:
    """The demo config, cut down: fewer queries, shorter answers, smaller batches."""
    from rmb_build.commands.build import load_build_config

    cfg, _ = load_build_config(None, "bench-orchestration")
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["sources"][0]["limit"] = max(60, queries * 6)
    data["select"].update(total=queries, min_per_goal=max(1, queries // 4), per_scenario=2)
    for gen in data["generators"]:
        gen["max_tokens"] = min(gen["max_tokens"], 16)
    data["judge"].update(max_tokens=40, max_reasks=0)
    data["run"]["batch_size"] = batch_size
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=2)
    args = ap.parse_args()

    from rmb_build.pipeline.env import configure_prefect

    configure_prefect(REPO)  # PREFECT_HOME in runs/.prefect, as `rmb build` uses
    from rmb_build.core.errors import RMBError
    from rmb_build.pipeline.config import parse_config
    from rmb_build.pipeline.run import run_build

    cfg = parse_config(bench_config(args.queries, args.batch_size), "<bench config>")
    with tempfile.TemporaryDirectory(prefix="rmb-bench-orch-") as work:
        t0 = time.time()
        try:
            run_build(cfg, work)
            outcome = "release written"
        except RMBError as exc:  # the tiny model may score every answer alike: timings still stand
            outcome = f"no release ({exc})"
        wall = time.time() - t0
        summary = json.loads((Path(work) / "runs" / cfg.name / "summary.json").read_text())
    started = datetime.strptime(summary["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    server_start = max(0.0, started - t0)  # before the flow body runs: temporary server, flow run creation
    work_s = summary["work_s"]
    task_runs = sum(s["batches"] for s in summary["stages"])
    overhead = wall - work_s
    warm_wall = wall - server_start
    rows = [
        ("wall_s", wall),
        ("server_start_s", server_start),
        ("work_s", work_s),
        ("overhead_s", overhead),
        ("task_runs", task_runs),
    ]
    rows += [(f"  {s['stage']}_s", s["seconds"]) for s in summary["stages"]]
    print(f"orchestration bench: {args.queries} queries, batches of {args.batch_size}; {outcome}")
    for name, value in rows:
        print(f"{name:<24}{value:>10.2f}" if isinstance(value, float) else f"{name:<24}{value:>10}")
    result = {
        "queries": args.queries,
        "task_runs": task_runs,
        "wall_s": round(wall, 2),
        "server_start_s": round(server_start, 2),
        "work_s": round(work_s, 2),
        "overhead_s": round(overhead, 2),
        "overhead_fraction": round(overhead / wall, 4),
        "overhead_fraction_warm": round((warm_wall - work_s) / warm_wall, 4) if warm_wall > 0 else None,
        "overhead_per_task_run_ms": round(1000 * (warm_wall - work_s) / max(task_runs, 1), 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
