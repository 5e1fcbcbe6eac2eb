"""One raw source record as a ``Query``: the rules every source shares (see ``rmb_build.stages.gather``):
which fields hold the conversation, the prompt, the id and the scenario; the turn order and cut;
the filters (``min_chars``, ``max_chars``, ``languages``); and an RMB release's conversations."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

from rmb_build.core.items import Turn
from rmb_build.core.jsonl import BadLine
from rmb_build.core.records import Query, query_id
from rmb_build.core.taxonomy import is_known
from rmb_build.stages.language import detect_language
from rmb_build.stages.sources.label_sets import LabelSet, load_label_set
from rmb_build.stages.sources.options import SourceOptions as SourceConfig

if TYPE_CHECKING:
    from rmb_build.release.read import Release

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
    source_id = _source_id(record, src, where)
    _check_labelled_only(source_id, src)  # before the work below: most records of a big file are not labelled
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
    return with_peoples_label(
        Query(query_id(label, source_id), conversation, label, source_id, language, scenario), src
    )


def _check_labelled_only(source_id: str, src: SourceConfig) -> None:
    if src.labelled_only and src.labels:  # SourceOptions refuses labelled_only without labels
        _labelled_only(source_id, load_label_set(src.labels))


def _labelled_only(source_id: str, label_set: LabelSet) -> None:
    if source_id not in label_set.labels:
        raise Skip(f"not labelled by label set {label_set.name!r} (labelled_only)", False)


def with_peoples_label(q: Query, src: SourceConfig) -> Query:
    """``q`` with the scenario its source's label set gives it (which wins over the record's own field),
    or Skip when ``labelled_only`` and the set gives none; every source kind's queries pass through here.
    A label whose ``prompt_sha256`` is not this query's prompt is not applied (counted as a Skip reason
    with ``labelled_only``, else the query goes on unlabelled)."""
    if not src.labels:
        return q
    label_set = load_label_set(src.labels)
    if src.labelled_only:
        _labelled_only(q.source_id, label_set)
    scenario = label_set.label_of(q.source_id, q.prompt)
    if scenario is None:
        if src.labelled_only:
            raise Skip(f"label set {label_set.name!r}: the labelled prompt is not this record's final user turn", False)
        return q
    return dataclasses.replace(q, scenario_id=scenario, labelled_by=label_set.name)


def release_queries(release: Release, label: str | None = None) -> list[Query]:
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
