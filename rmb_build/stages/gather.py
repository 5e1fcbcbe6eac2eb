"""Stage 1, gather: queries from ShareGPT, Hugging Face datasets, local JSONL/JSON/Parquet files and
existing RMB releases, normalised to ``Query`` records that end with a user turn.

Rules, the same for every source:
- a conversation is a list of turns (``role``/``content``, ShareGPT's ``from``/``value``, or RMB's
  ``conversation_input``) or a single prompt field; an optional leading system turn is kept;
- it must start with a user turn and alternate user/assistant; it is cut to its longest prefix of at
  most ``max_turns`` turns (system turn not counted) that ends with a user turn, as RMB's 1-, 3- and
  5-turn conversations are;
- ``min_chars`` applies to the final user turn, ``max_chars`` to the whole conversation, ``languages``
  to the final user turn's language (its own tag, else a heuristic guess: see ``language.py``);
  an RMB release's conversations are kept as they are (``max_turns`` filters them instead).
A well-formed record that fails a filter is *filtered*; a malformed one is *quarantined* (written to
the quarantine JSONL with the reason). Every query keeps its source and the source's own id.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from rmb_build.core import atomic
from rmb_build.core import paths as P
from rmb_build.core.errors import InputError
from rmb_build.core.json_array import ArrayTail
from rmb_build.core.jsonl import BadLine, read_jsonl_objects
from rmb_build.core.records import Query
from rmb_build.stages.options import SourceConfig
from rmb_build.stages.sources import source_for
from rmb_build.stages.sources.label_sets import load_label_set
from rmb_build.stages.sources.records import (
    Skip,
)
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the build config and run are the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Flow


def source_label(src: SourceConfig) -> str:
    """A machine-independent name for a source: part of every query's id, so ids stay stable."""
    return source_for(src).label()


@dataclass
class SourceStats:
    read: int = 0
    kept: int = 0
    filtered: int = 0
    quarantined: int = 0
    incomplete_tail: int = 0  # characters of a cut-off final record (0: the source ended cleanly)
    reasons: Counter = field(default_factory=Counter)
    label_set: dict[str, Any] | None = None  # the source's label set: name, labels listed
    labelled: int = 0  # queries its label set labelled

    def as_dict(self) -> dict[str, Any]:
        out = {
            "read": self.read,
            "kept": self.kept,
            "filtered": self.filtered,
            "quarantined": self.quarantined,
            "incomplete_tail": self.incomplete_tail,
            "reasons": dict(self.reasons.most_common()),
        }
        if self.label_set is not None:
            out["label_set"] = {**self.label_set, "applied": self.labelled}
        return out


@dataclass
class GatherResult:
    queries: list[Query]
    stats: dict[str, dict[str, Any]]  # per source label: read, kept, filtered, quarantined, incomplete_tail, reasons


def _iter_source(src: SourceConfig, label: str, stats: SourceStats, quarantine: list[dict]) -> Iterator[Query]:
    source = source_for(src)
    tail = ArrayTail()
    seen_ids: set[str] = set()
    for where, record in source.records(tail):
        stats.read += 1
        if stats.read <= src.skip:
            continue
        try:
            q = source.to_query(record, label, where)
            if q.source_id in seen_ids:
                raise Skip(f"duplicate source id {q.source_id!r}", True)
            seen_ids.add(q.source_id)
            yield q
        except Skip as skip:
            stats.reasons[skip.reason] += 1
            if skip.quarantine:
                stats.quarantined += 1
                quarantine.append(
                    {
                        "source": label,
                        "where": where,
                        "reason": skip.reason,
                        "record": record.text if isinstance(record, BadLine) else record,
                    }
                )
            else:
                stats.filtered += 1
    stats.incomplete_tail = tail.incomplete_chars


def gather(
    sources: Sequence[SourceConfig], *, quarantine_path: str | os.PathLike | None = None, limit: int | None = None
) -> GatherResult:
    """Read every source in order and return its queries plus per-source stats.

    ``limit`` caps the total number of queries (each source's own ``limit`` caps that source).
    Malformed records go to ``quarantine_path`` (JSONL: source, where, reason, record), written
    atomically at the end even when no record was quarantined, so a re-run replaces a stale file.
    """
    queries: list[Query] = []
    stats: dict[str, dict[str, Any]] = {}
    quarantine: list[dict] = []
    taken: dict[str, int] = {}  # query id -> its place in ``queries``
    for i, src in enumerate(sources):
        label = source_label(src)
        key = label if label not in stats else f"{label}#{i}"
        s = SourceStats()
        if src.labels:
            label_set = load_label_set(src.labels)
            s.label_set = {"name": label_set.name, "listed": len(label_set.labels)}
        for q in _iter_source(src, label, s, quarantine):
            if limit is not None and len(queries) >= limit:
                break
            if q.id in taken:  # a record two sources read (the same file with other filters) is kept once
                _merge_label(queries, taken[q.id], q, s)
                continue
            taken[q.id] = len(queries)
            queries.append(q)
            s.labelled += q.labelled_by is not None
            s.kept += 1
            if src.limit is not None and s.kept >= src.limit:
                break
        stats[key] = s.as_dict()
        if limit is not None and len(queries) >= limit:
            break
    if quarantine_path is not None:
        atomic.write_jsonl(quarantine_path, quarantine)
    return GatherResult(queries, stats)


def _merge_label(queries: list[Query], at: int, again: Query, stats: SourceStats) -> None:
    """A record an earlier source gave already: filtered here, but a person's label this source has and
    the earlier copy lacks goes onto that copy (source order does not lose a label)."""
    reason = "already gathered from an earlier source"
    if again.labelled_by and not queries[at].labelled_by:
        queries[at] = dataclasses.replace(queries[at], scenario_id=again.scenario_id, labelled_by=again.labelled_by)
        reason += " (its label put on that copy)"
        stats.labelled += 1
    stats.reasons[reason] += 1
    stats.filtered += 1


def write_queries(queries: Sequence[Query], path: str | os.PathLike) -> None:
    """Write queries as JSONL (one ``Query.to_json`` per line), atomically."""
    atomic.write_jsonl(path, (q.to_json() for q in queries))


def read_queries(path: str | os.PathLike) -> list[Query]:
    """Read a queries JSONL written by ``write_queries``; a bad line raises InputError naming it."""
    out = []
    for n, row in read_jsonl_objects(path):
        try:
            out.append(Query.from_json(row))
        except KeyError as exc:
            raise InputError(str(path), "missing", line=n, field=str(exc.args[0])) from None
        except (TypeError, AttributeError) as exc:
            raise InputError(str(path), f"malformed query: {exc}", line=n) from None
    return out


def gather_batch(env: StageEnv, quarantine_path: str, limit: int | None) -> StageResult[list[Query]]:
    """The sources' queries; per source label, what each read, kept and turned away (the stage's stats)."""
    gathered = gather(env.section, quarantine_path=quarantine_path, limit=limit)
    return StageResult(gathered.queries, stats=gathered.stats)


def _sources_identity(cfg: BuildConfig) -> list[object]:
    """What each source says identifies it (files' sizes and mtimes, a package version), its label
    set's digest, and the build's query limit."""
    from rmb_build.stages.sources import label_sets

    return [
        [source_for(s).identity() for s in cfg.sources],
        [label_sets.identity(s.labels) for s in cfg.sources],
        cfg.run.max_queries,
    ]


async def gather_into(run: BuildRun, flow: Flow) -> None:
    """The gathered queries into the flow's pool, written to the raw folder, counted in the run's accounting."""
    gathered = run.record(SPEC, [run.call(SPEC, str(run.paths.raw / P.QUARANTINE), run.cfg.run.max_queries)])[0]
    write_queries(gathered.records, run.paths.raw / P.RAW_QUERIES)
    run.acc.count_gathered(run.cfg, len(gathered.records), gathered.stats)
    flow.queries = gathered.records


SPEC = StageSpec(
    "gather",
    gather_batch,
    config="sources",
    identity=_sources_identity,
    keyed_inputs=False,
    at=Position.POOL,
    on_run=gather_into,
)
