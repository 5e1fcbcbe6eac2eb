"""What the readers of the field's other benchmark formats share: the release they build (RMB's item
model plus what the format's own headline needs per item), the checks of their common fields, and the
encoding of names from the data (``encode_label``) where they become part of an id."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

from rmb_build.benchmarks.tables import Row
from rmb_build.core.items import Answer, Turn
from rmb_build.release.read import Release
from rmb_build.release.rmb_format import VALID_ROLES


@dataclass
class BenchmarkRelease(Release):
    """A release read from another benchmark's format. ``item_meta[(set, uid)]`` holds what the format's
    headline metric needs beyond the item (its subset, its cell of a style matrix, ...); ``origin`` says
    where a downloaded release came from (URL and checksums)."""

    benchmark_format: str = "rmb"
    item_meta: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    origin: dict[str, Any] | None = None

    @classmethod
    def empty(cls, name: str, fmt: str) -> "BenchmarkRelease":
        """A release of format ``fmt`` with no items yet."""
        return cls(name=name, root=None, source_format=fmt, benchmark_format=fmt)


def conversation(row: Row, key: str = "prompt") -> tuple[Turn, ...]:
    """The row's prompt as a conversation: a string is one user turn; a list of ``{role, content}``
    messages is taken as is and must end with a user turn."""
    if key not in row.data:
        raise row.fail(key, "missing")
    raw = row.data[key]
    if isinstance(raw, str):
        if not raw.strip():
            raise row.fail(key, "empty prompt")
        return (Turn("user", raw),)
    if not isinstance(raw, list) or not raw:
        raise row.fail(key, f"expected a string or a non-empty list of messages, got {type(raw).__name__}")
    turns = []
    for i, msg in enumerate(raw):
        where = f"{key}[{i}]"
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str) or not isinstance(msg.get("content"), str):
            raise row.fail(where, "expected a message with string 'role' and 'content'")
        if msg["role"] not in VALID_ROLES:
            raise row.fail(f"{where}.role", f"unknown role {msg['role']!r} (expected one of {', '.join(VALID_ROLES)})")
        turns.append(Turn(msg["role"], msg["content"]))
    if turns[-1].role != "user":
        raise row.fail(key, f"conversation ends with a {turns[-1].role!r} turn, not a user turn")
    return tuple(turns)


def text(row: Row, key: str) -> str:
    """A required string field."""
    if key not in row.data:
        raise row.fail(key, "missing")
    value = row.data[key]
    if not isinstance(value, str):
        raise row.fail(key, f"expected a string, got {type(value).__name__}")
    return value


def texts(row: Row, key: str, size: int | None = None, minimum: int = 1) -> list[str]:
    """A required list of strings (of exactly ``size`` when given, else at least ``minimum``)."""
    if key not in row.data:
        raise row.fail(key, "missing")
    value = row.data[key]
    if not isinstance(value, list):
        raise row.fail(key, f"expected a list of strings, got {type(value).__name__}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise row.fail(f"{key}[{i}]", f"expected a string, got {type(v).__name__}")
    if size is not None and len(value) != size:
        raise row.fail(key, f"expected exactly {size} answers, got {len(value)}")
    if len(value) < minimum:
        raise row.fail(key, f"expected at least {minimum} answer{'s' if minimum > 1 else ''}, got {len(value)}")
    return value


def optional_name(row: Row, key: str, default: str) -> str:
    """An optional string field (a subset, a domain, a model name); ``default`` when absent or null."""
    value = row.data.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        raise row.fail(key, f"expected a non-empty string, got {value!r}")
    return value


def answer(row: Row, model_key: str, text_value: str, default_model: str) -> Answer:
    return Answer(optional_name(row, model_key, default_model), text_value)


_ENCODED = re.compile(r"%(25|2F)")


def encode_label(name: str) -> str:
    """``name`` (a subset or domain from the data) as one '/'-separated part of a scenario id, a uid or a
    file name: ``%`` becomes ``%25`` and ``/`` becomes ``%2F`` (``bigcode/humanevalpack`` ->
    ``bigcode%2Fhumanevalpack``); every other character is kept. Labels in summaries stay verbatim."""
    return name.replace("%", "%25").replace("/", "%2F")


def decode_label(part: str) -> str:
    """The name ``encode_label`` encoded."""
    return _ENCODED.sub(lambda m: "%" if m[1] == "25" else "/", part)


def with_uids(rows: Sequence[Row], scope: Callable[[Row], str] | None = None) -> Iterator[tuple[str, Row]]:
    """Each row with its uid: the row's ``id`` when it has one, else its position among all rows; a
    repeated id is an error. With ``scope`` (a row's group, such as its domain), ids need only be unique
    within each group, and the uid of a row with an ``id`` is ``<encoded group>/<id>``."""
    seen: dict[str, str] = {}
    for position, row in enumerate(rows):
        raw = row.data.get("id")
        if raw is None:
            uid = str(position)
        elif isinstance(raw, bool) or not isinstance(raw, (str, int)):
            raise row.fail("id", f"expected a string or integer id, got {type(raw).__name__}")
        else:
            uid = str(raw)
        if scope is not None and raw is not None:
            uid = f"{encode_label(scope(row))}/{uid}"
        if uid in seen:
            raise row.fail("id", f"duplicate id {uid!r} (also in {seen[uid]})")
        seen[uid] = row.file
        yield uid, row


__all__ = [
    "BenchmarkFormat",
    "BenchmarkRelease",
    "Misfit",
    "answer",
    "conversation",
    "decode_label",
    "encode_label",
    "optional_name",
    "text",
    "texts",
    "with_uids",
]


# A format's headline is computed from results' item predictions and the release's item_meta.
Predictions = Sequence[Mapping[str, Any]]
Meta = Mapping[tuple[str, str], Mapping[str, Any]]
Misfit = tuple[str | None, str]  # why a record is not of a format: (its field, if one names it; the reason)


@dataclass(frozen=True)
class BenchmarkFormat:
    """One of the field's formats, as its module registers it in ``benchmarks.BENCHMARK_FORMATS``: how its
    records are read and scored, how ``formats.detect_format`` tells them from the others', and the
    protocol its authors' harness uses. A format that sets neither ``own_fields`` nor ``answers`` is never
    detected: only ``--format`` names it."""

    name: str  # what --format says
    build: Callable[[Sequence[Row], str], BenchmarkRelease]  # (rows, release name) -> RMB's items
    summary: Callable[[Predictions, Meta, str], dict[str, Any]]  # results.json's ``benchmark`` headline
    title: str = ""  # the benchmark's name in prose (``RM-Bench``); the name when empty
    # Fields every record of this format has and no other format's records have: the first record having
    # them all is enough (judgebench).
    own_fields: tuple[str, ...] = ()
    # Else records of ``prompt``, ``chosen`` and ``rejected`` whose answers are of this kind ("string" or
    # "list"); ``misfit`` says why a record of that kind is not of this format (None: every record is),
    # ``fits_as`` what a record that fits has, for the error naming several formats that fit, and
    # ``order`` the order the formats of one kind are tried and named in (lower first, then by name).
    answers: Literal["string", "list"] | None = None
    misfit: Callable[[Row], Misfit | None] | None = None
    fits_as: str = ""
    order: int = 0
    protocol: str | None = None  # the authors' harness protocol (``evaluate.protocols``), the default

    def __post_init__(self) -> None:
        if self.own_fields and self.answers is not None:
            raise ValueError(f"benchmark format {self.name!r}: detected by own_fields or by answers, not both")
        if self.answers not in (None, "string", "list"):
            raise ValueError(f"benchmark format {self.name!r}: answers is 'string' or 'list', not {self.answers!r}")


def mean_or_none(values: Sequence[float]) -> float | None:
    return fmean(values) if values else None


def won(prediction: Mapping[str, Any]) -> float:
    """A pair's outcome with a tie counted as wrong, whatever ``--ties`` gave it (RewardBench's and RM-Bench's
    rule): only a win scores 1 (a tie under ``half`` scored 0.5, under ``strict`` 0)."""
    return 1.0 if prediction["outcome"] == 1.0 else 0.0


def group_by(predictions: Predictions, meta: Meta, key: str) -> dict[str, list[Mapping[str, Any]]]:
    """Predictions grouped by one field of their item's meta (a subset, a domain, a level)."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for p in predictions:
        groups[meta[(p["set"], p["uid"])][key]].append(p)
    return dict(groups)
