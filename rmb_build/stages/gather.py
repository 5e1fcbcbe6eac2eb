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

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from rmb_build.core import atomic
from rmb_build.core.errors import InputError
from rmb_build.core.items import Turn
from rmb_build.core.json_array import ArrayTail
from rmb_build.core.jsonl import BadLine, read_jsonl_objects
from rmb_build.core.records import Query, query_id
from rmb_build.core.taxonomy import is_known
from rmb_build.stages.language import detect_language
from rmb_build.stages.options import SourceConfig
from rmb_build.stages.sources import source_for

ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
}
CONVERSATION_FIELDS = ("conversation_input", "conversation", "conversations", "messages")
PROMPT_FIELDS = ("prompt", "instruction", "question", "query", "text")
ID_FIELDS = ("id", "uid", "prompt_id", "conversation_id", "pair_uid", "bon_uid")
SCENARIO_FIELDS = ("scenario_id", "scenario")


class Skip(Exception):
    """A record that is dropped: ``quarantine`` for malformed ones, else it was filtered."""

    def __init__(self, reason: str, quarantine: bool):
        super().__init__(reason)
        self.reason, self.quarantine = reason, quarantine


@dataclass
class SourceStats:
    read: int = 0
    kept: int = 0
    filtered: int = 0
    quarantined: int = 0
    incomplete_tail: int = 0  # characters of a cut-off final record (0: the source ended cleanly)
    reasons: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "kept": self.kept,
            "filtered": self.filtered,
            "quarantined": self.quarantined,
            "incomplete_tail": self.incomplete_tail,
            "reasons": dict(self.reasons.most_common()),
        }


@dataclass
class GatherResult:
    queries: list[Query]
    stats: dict[str, dict[str, Any]]  # per source label: read, kept, filtered, quarantined, incomplete_tail, reasons


def source_label(src: SourceConfig) -> str:
    """A machine-independent name for a source: part of every query's id, so ids stay stable."""
    return source_for(src).label()


def _field(record: dict, src: SourceConfig, ours: str, defaults: Sequence[str]) -> tuple[str | None, Any]:
    """(source field name, value) of our field ``ours``: the mapped name, else the first default present."""
    if ours in src.fields:
        name = src.fields[ours]
        return name, record.get(name)
    for name in defaults:
        if record.get(name) is not None:
            return name, record[name]
    return None, None


def _turns_from_list(raw: list, field_name: str) -> list[Turn]:
    turns = []
    for k, t in enumerate(raw):
        if not isinstance(t, dict):
            raise Skip(f"{field_name}[{k}] is not an object", True)
        role = ROLES.get(str(t.get("role", t.get("from", ""))).lower())
        content = t.get("content", t.get("value"))
        if role is None:
            raise Skip(f"{field_name}[{k}]: unknown role {t.get('role', t.get('from'))!r}", True)
        if not isinstance(content, str):
            raise Skip(f"{field_name}[{k}]: content is not a string", True)
        lang = t.get("language")
        turns.append(Turn(role, content, lang if isinstance(lang, str) else None))
    return turns


def record_turns(record: Any, src: SourceConfig) -> list[Turn]:
    """The turns a source record holds, before any cutting or filtering (Skip when malformed)."""
    if not isinstance(record, dict):
        raise Skip(f"record is a {type(record).__name__}, not an object", True)
    name, conv = _field(record, src, "conversation", CONVERSATION_FIELDS)
    if conv is not None:
        if not isinstance(conv, list):
            raise Skip(f"field '{name}' is not a list of turns", True)
        return _turns_from_list(conv, name or "conversation")
    name, prompt = _field(record, src, "prompt", PROMPT_FIELDS)
    if prompt is None:
        wanted = src.fields.get("prompt") or src.fields.get("conversation")
        raise Skip(f"no field '{wanted}'" if wanted else "no conversation or prompt field", True)
    if not isinstance(prompt, str):
        raise Skip(f"field '{name}' is not a string", True)
    # instruction-style datasets (Alpaca, Dolly) keep the material to work on in a second field
    ctx_name, ctx = _field(record, src, "context", ("input", "context") if name == "instruction" else ())
    if ctx is not None and not isinstance(ctx, str):
        raise Skip(f"field '{ctx_name}' is not a string", True)
    turns = [Turn("user", f"{prompt}\n\n{ctx}" if ctx and ctx.strip() else prompt)]
    _, system = _field(record, src, "system", ())
    return ([Turn("system", system)] if isinstance(system, str) and system.strip() else []) + turns


def shape_conversation(turns: list[Turn], max_turns: int | None) -> tuple[Turn, ...]:
    """Validate the turn order and cut to the longest prefix ending with a user turn within ``max_turns``."""
    system = turns[:1] if turns and turns[0].role == "system" else []
    body = turns[len(system) :]
    if not body:
        raise Skip("empty conversation", True)
    if body[0].role != "user":
        # ShareGPT splits long chats; a part that starts with the assistant lost its first question
        raise Skip(f"starts with a{'n' if body[0].role == 'assistant' else ''} {body[0].role} turn", False)
    for k, turn in enumerate(body):
        expected = "user" if k % 2 == 0 else "assistant"
        if turn.role != expected:
            raise Skip(f"turn {k + len(system)}: expected {expected}, got {turn.role} (roles must alternate)", True)
        if not turn.content.strip():
            raise Skip(f"turn {k + len(system)} is empty", True)
    n = len(body) if max_turns is None else min(len(body), max_turns)
    n -= n % 2 == 0  # user turns sit at even positions: 1, 3, 5 ...
    if n < 1:
        raise Skip("no user turn within max_turns", False)
    return tuple(system + body[:n])


def check_filters(conversation: Sequence[Turn], language: str | None, src: SourceConfig) -> None:
    """The length and language filters of a source (Skip, not quarantined, when one fails)."""
    if len(conversation[-1].content.strip()) < src.min_chars:
        raise Skip(f"final user turn shorter than min_chars={src.min_chars}", False)
    if src.max_chars is not None and sum(len(t.content) for t in conversation) > src.max_chars:
        raise Skip(f"conversation longer than max_chars={src.max_chars}", False)
    if src.languages and (language or "").casefold() not in {x.casefold() for x in src.languages}:
        raise Skip(f"language {language or 'unknown'} not in {src.languages}", False)


def tag_languages(conversation: tuple[Turn, ...], final: str | None) -> tuple[Turn, ...]:
    """Give untagged turns a ``language`` as RMB does per turn (``final`` for the last user turn)."""
    last = len(conversation) - 1
    return tuple(
        t if t.language else Turn(t.role, t.content, final if k == last else detect_language(t.content))
        for k, t in enumerate(conversation)
    )


def _source_id(record: Any, src: SourceConfig, where: int) -> str:
    if isinstance(record, dict):
        _, value = _field(record, src, "id", ID_FIELDS)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    return f"#{where}"


def make_query(record: Any, src: SourceConfig, label: str, where: int) -> Query:
    """One source record as a Query, or Skip (filtered or quarantined) with the reason."""
    if isinstance(record, BadLine):
        raise Skip(record.reason, True)
    conversation = shape_conversation(record_turns(record, src), src.max_turns)
    last = conversation[-1]
    _, lang = _field(record, src, "language", ("language",))
    language = last.language or (lang if isinstance(lang, str) else None) or detect_language(last.content)
    check_filters(conversation, language, src)
    conversation = tag_languages(conversation, language)
    scenario = None
    name, label_value = _field(record, src, "scenario", SCENARIO_FIELDS)
    if label_value is not None:
        if not (isinstance(label_value, str) and is_known(label_value)):
            raise Skip(f"field '{name}': {label_value!r} is not one of the 49 scenario ids", True)
        scenario = label_value
    source_id = _source_id(record, src, where)
    return Query(query_id(label, source_id), conversation, label, source_id, language, scenario)


def release_queries(release: Any, label: str | None = None) -> list[Query]:
    """One Query per distinct conversation of an RMB release (first occurrence wins), labelled with
    its file's scenario; ``source_id`` is ``<set>:<uid>``."""
    from rmb_build.core.items import conversation_key

    label = label or release.name
    out, seen = [], set()
    for item in release.items():
        key = conversation_key(item.conversation)
        if key in seen:
            continue
        seen.add(key)
        sid = f"{item.set_name}:{item.uid}"
        language = item.conversation[-1].language if item.conversation else None
        out.append(Query(query_id(label, sid), tuple(item.conversation), label, sid, language, item.scenario_id))
    return out


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
    for i, src in enumerate(sources):
        label = source_label(src)
        key = label if label not in stats else f"{label}#{i}"
        s = SourceStats()
        for q in _iter_source(src, label, s, quarantine):
            if limit is not None and len(queries) >= limit:
                break
            queries.append(q)
            s.kept += 1
            if src.limit is not None and s.kept >= src.limit:
                break
        stats[key] = s.as_dict()
        if limit is not None and len(queries) >= limit:
            break
    if quarantine_path is not None:
        atomic.write_jsonl(quarantine_path, quarantine)
    return GatherResult(queries, stats)


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
