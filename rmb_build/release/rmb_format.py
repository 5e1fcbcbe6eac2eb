"""RMB's on-disk layout: parse and validate one set file's JSON into typed records, and back.

Official files are ``json.dumps(items, indent=1, ensure_ascii=False)`` with no trailing newline;
``dumps_items`` reproduces those bytes exactly from records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NoReturn

from rmb_build.core.errors import InputError
from rmb_build.core.items import Answer, BonItem, Item, PairwiseItem, Turn
from rmb_build.core.json_array import ArrayTail, iter_json_array
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET

VALID_ROLES = ("user", "assistant", "system")


def load_json_file(path: Path, display: str | None = None) -> object:
    """Parse a JSON file; invalid UTF-8 or JSON raises InputError with the line."""
    name = display or str(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(name, f"invalid UTF-8 at byte {exc.start}", line=line) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated JSON" if exc.pos >= len(text.rstrip()) else "invalid JSON"
        raise InputError(name, f"{what}: {exc.msg} (column {exc.colno})", line=exc.lineno) from None


def load_json_object(path: Path, display: str | None = None) -> dict[str, Any]:
    """``load_json_file`` of a file that must hold one JSON object (a manifest): InputError for anything else."""
    data = load_json_file(path, display)
    if not isinstance(data, dict):
        raise InputError(display or str(path), f"expected a JSON object, got {type(data).__name__}")
    return data


def dumps_items(items: list[Item]) -> str:
    """The exact text of an RMB set file holding ``items``."""
    return json.dumps([it.to_rmb() for it in items], indent=1, ensure_ascii=False)


FILE_START, ITEM_SEPARATOR, FILE_END, EMPTY_FILE = "[\n", ",\n", "\n]", "[]"


def dumps_element(item: Item) -> str:
    """``item`` as it appears inside ``dumps_items``' list: its own ``indent=1`` text with every line
    indented one more space (JSON strings hold no raw newline, so every newline is a line break)."""
    return " " + json.dumps(item.to_rmb(), indent=1, ensure_ascii=False).replace("\n", "\n ")


class _Ctx:
    """Where we are, for error messages."""

    def __init__(self, file: str, index: int, raw: object):
        self.file = file
        uid = None
        if isinstance(raw, dict):
            uid = raw.get("pair_uid", raw.get("bon_uid"))
        self.item = f"{index}" + (f" (uid {uid})" if isinstance(uid, (str, int)) else "")

    def fail(self, field: str | None, message: str) -> InputError:
        return InputError(self.file, message, item=self.item, field=field)


def _str(ctx: _Ctx, obj: dict, key: str, field: str) -> str:
    if key not in obj:
        raise ctx.fail(field, "missing")
    value = obj[key]
    if not isinstance(value, str):
        raise ctx.fail(field, f"expected a string, got {type(value).__name__}")
    return value


def _uid(ctx: _Ctx, obj: dict, key: str) -> str:
    if key not in obj:
        raise ctx.fail(key, "missing")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ctx.fail(key, f"expected a string or integer uid, got {type(value).__name__}")
    return str(value)


def _answer(ctx: _Ctx, raw: object, field: str) -> Answer:
    if not isinstance(raw, dict):
        raise ctx.fail(field, f"expected an object with llm_name and answer, got {type(raw).__name__}")
    return Answer(_str(ctx, raw, "llm_name", f"{field}.llm_name"), _str(ctx, raw, "answer", f"{field}.answer"))


def _conversation(ctx: _Ctx, obj: dict, strict: bool) -> tuple[Turn, ...]:
    if "conversation_input" not in obj:
        raise ctx.fail("conversation_input", "missing")
    raw = obj["conversation_input"]
    if not isinstance(raw, list):
        raise ctx.fail("conversation_input", f"expected a list of turns, got {type(raw).__name__}")
    turns = []
    for i, t in enumerate(raw):
        field = f"conversation_input[{i}]"
        if not isinstance(t, dict):
            raise ctx.fail(field, f"expected a turn object, got {type(t).__name__}")
        lang = t.get("language")
        if lang is not None and not isinstance(lang, str):
            raise ctx.fail(f"{field}.language", f"expected a string, got {type(lang).__name__}")
        role = _str(ctx, t, "role", f"{field}.role")
        if strict and role not in VALID_ROLES:
            raise ctx.fail(f"{field}.role", f"unknown role {role!r} (expected one of {', '.join(VALID_ROLES)})")
        turns.append(Turn(role, _str(ctx, t, "content", f"{field}.content"), lang))
    if strict:
        if not turns:
            raise ctx.fail("conversation_input", "empty conversation")
        if turns[-1].role != "user":
            raise ctx.fail("conversation_input", f"conversation ends with a {turns[-1].role!r} turn, not a user turn")
    return tuple(turns)


def _category_path(ctx: _Ctx, obj: dict) -> str:
    value = obj.get("category_path", "")
    if not isinstance(value, str):
        raise ctx.fail("category_path", f"expected a string, got {type(value).__name__}")
    return value


def turns_json(turns: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """A conversation column's turns (the Hugging Face form's rows) as RMB's ``conversation_input`` records,
    for ``parse_item`` to check as it checks a set file's."""
    out = []
    for t in turns or []:
        turn = {"content": t.get("content")}
        if t.get("language") is not None:
            turn["language"] = t["language"]
        turn["role"] = t.get("role")
        out.append(turn)
    return out


def parse_item(set_name: str, raw: object, scenario_id: str, file: str, index: int, strict: bool = True) -> Item:
    """One item of a set file as a record; raises InputError naming file, item and field."""
    ctx = _Ctx(file, index, raw)
    if not isinstance(raw, dict):
        raise ctx.fail(None, f"expected an object, got {type(raw).__name__}")
    conversation = _conversation(ctx, raw, strict)
    if set_name == PAIRWISE_SET:
        return PairwiseItem(
            uid=_uid(ctx, raw, "pair_uid"),
            conversation=conversation,
            chosen=_answer(ctx, raw.get("chosen"), "chosen") if "chosen" in raw else _missing(ctx, "chosen"),
            rejected=_answer(ctx, raw.get("reject"), "reject") if "reject" in raw else _missing(ctx, "reject"),
            scenario_id=scenario_id,
            category_path=_category_path(ctx, raw),
        )
    if set_name != BON_SET:
        raise ValueError(f"unknown set {set_name!r}")
    if "bon_best" not in raw:
        _missing(ctx, "bon_best")
    if "loser_list" not in raw:
        _missing(ctx, "loser_list")
    losers_raw = raw["loser_list"]
    if not isinstance(losers_raw, list):
        raise ctx.fail("loser_list", f"expected a list of answers, got {type(losers_raw).__name__}")
    if not losers_raw:
        raise ctx.fail("loser_list", "empty: a Best-of-N item needs at least one loser")
    return BonItem(
        uid=_uid(ctx, raw, "bon_uid"),
        conversation=conversation,
        best=_answer(ctx, raw["bon_best"], "bon_best"),
        losers=tuple(_answer(ctx, a, f"loser_list[{i}]") for i, a in enumerate(losers_raw)),
        scenario_id=scenario_id,
        category_path=_category_path(ctx, raw),
    )


def _missing(ctx: _Ctx, field: str) -> NoReturn:
    raise ctx.fail(field, "missing")


def iter_set_file(path: Path, set_name: str, scenario_id: str, display: str, strict: bool = True) -> Iterator[Item]:
    """The items of one set file in file order, decoded one at a time (``parse_set_file``'s checks)."""
    tail = ArrayTail()
    try:
        for i, raw in iter_json_array(path, tail):
            yield parse_item(set_name, raw, scenario_id, display, i, strict)
    except UnicodeDecodeError as exc:
        raise InputError(display, f"invalid UTF-8 at byte {exc.start} of a read chunk") from None
    if not tail.complete:
        raise InputError(display, "truncated JSON: the list of items is not closed")


def parse_set_file(path: Path, set_name: str, scenario_id: str, display: str, strict: bool = True) -> list[Item]:
    """All items of one set file, in file order."""
    data = load_json_file(path, display)
    if not isinstance(data, list):
        raise InputError(display, f"expected a JSON list of items, got {type(data).__name__}")
    return [parse_item(set_name, raw, scenario_id, display, i, strict) for i, raw in enumerate(data)]
