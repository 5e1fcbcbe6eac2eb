"""A build's working state under ``runs/<name>/``: ``failures.jsonl`` and ``summary.json``.

Both files are rewritten whole (atomically) after every stage from what the stages returned, so a
build resumed from its cached stage results writes the same files as one that ran straight through.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from rmb_build.core import atomic
from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.core.paths import FAILURES_FILE, SUMMARY_FILE, USAGE_FILE
from rmb_build.core.records import Failure

TIMING_NOTE = (
    "elapsed_s = work_s + release_s + orchestration_s. work_s: wall time during which some stage "
    "worked (the union of the stages' spans, this run's work only: cached batches cost none); "
    "stage_seconds_s: the stages' seconds summed, more than work_s by overlap_s where batches and "
    "stages ran at once; orchestration_s: the rest (Prefect's task runs and result storage, the "
    "flow's glue: selection, query files, starting the LLM client)"
)


def merge_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Stats merged: numbers summed, mappings merged recursively, anything else kept from the last."""
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in part.items():
            if isinstance(v, Mapping):
                out[k] = merge_stats([out.get(k) or {}, v])
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(out.get(k, 0), (int, float)):
                out[k] = out.get(k, 0) + v
            else:
                out[k] = v
    return out


@dataclass
class StageRecord:
    """What one stage did: items in and out, its own stats, seconds of work, whether it came from cache."""

    stage: str
    seconds: float = 0.0  # summed over batches (batches that ran at once each count), or one timed block
    batches: int = 0
    cached_batches: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    spans: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of batches computed in this run

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "seconds": round(self.seconds, 3),
            "wall_seconds": round(busy_seconds(self.spans), 3),
            "batches": self.batches,
            "cached_batches": self.cached_batches,
            "stats": self.stats,
        }


class RunState:
    """Failures and per-stage records of one build, flushed to ``runs/<name>/`` as they come."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.failures: list[Failure] = []
        self.stages: dict[str, StageRecord] = {}
        self.spans: list[tuple[float, float]] = []  # (start, end) of stage work computed in this run
        self.release_seconds = 0.0  # writing and auditing the release: work outside any stage record
        self.started = time.time()
        # A resumed build gets earlier runs' answers from caches: what they spent is counted from here.
        usage_file = self.root / USAGE_FILE
        self.usage_before: dict[str, Any] = json.loads(usage_file.read_text()) if usage_file.exists() else {}
        self.usage_run: dict[str, Any] = {}

    def usage_total(self) -> dict[str, Any]:
        """LLM usage of every run of this build: ``{stage: {model: {requests, prompt_tokens, cost_usd, ...}}}``."""
        return merge_stats([self.usage_before, self.usage_run])

    def stage(self, name: str) -> StageRecord:
        return self.stages.setdefault(name, StageRecord(name))

    def add_work(self, name: str, started: float, seconds: float) -> StageRecord:
        """Count ``seconds`` of work computed in this run, begun at ``started`` (epoch), to stage ``name``."""
        rec = self.stage(name)
        rec.seconds += seconds
        rec.spans.append((started, started + seconds))
        self.spans.append((started, started + seconds))
        return rec

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[StageRecord]:
        """Time the block as work of stage ``name`` (for work that is no task batch), failing or not."""
        started, t0 = time.time(), time.perf_counter()
        try:
            yield self.stage(name)
        finally:
            self.add_work(name, started, time.perf_counter() - t0)

    def timing(self, elapsed: float) -> dict[str, Any]:
        """How ``elapsed`` seconds of this run split: stage work, the release's write, orchestration."""
        elapsed, work, release = (round(x, 3) for x in (elapsed, busy_seconds(self.spans), self.release_seconds))
        summed = round(sum(s.seconds for s in self.stages.values()), 3)
        return {
            "elapsed_s": elapsed,
            "work_s": work,
            "stage_seconds_s": summed,
            "overlap_s": round(max(0.0, summed - work), 3),
            "release_s": release,
            "orchestration_s": round(max(0.0, elapsed - work - release), 3),
            "note": TIMING_NOTE,
        }

    def add_failures(self, failures: Iterable[Failure]) -> None:
        self.failures.extend(failures)

    def failure_counts(self) -> dict[str, int]:
        """Failures per stage."""
        return dict(Counter(f.stage for f in self.failures))

    def flush(self, **extra: object) -> None:
        """Rewrite failures.jsonl, usage.json and summary.json (``extra`` goes into the summary)."""
        atomic.write_jsonl(self.root / FAILURES_FILE, (f.to_json() for f in self.failures))
        atomic.write_json(self.root / USAGE_FILE, self.usage_total())
        elapsed = time.time() - self.started
        atomic.write_json(
            self.root / SUMMARY_FILE,
            {
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                "elapsed_s": round(elapsed, 3),
                "work_s": round(busy_seconds(self.spans), 3),
                "timing": self.timing(elapsed),
                "stages": [s.to_json() for s in self.stages.values()],
                "failures": self.failure_counts(),
                "usage": self.usage_total(),
                "usage_this_run": self.usage_run,
                **extra,
            },
        )


def busy_seconds(spans: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``spans``: wall time during which some stage work was running
    (batches run concurrently, so their seconds overlap)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def read_failures(path: str | Path) -> list[Failure]:
    """The failures of a run folder (or a failures.jsonl path); empty if none were written."""
    path = Path(path)
    if path.is_dir():
        path = path / FAILURES_FILE
    if not path.exists():
        return []
    return [Failure.from_json(row) for _, row in read_jsonl_objects(path)]
