"""A release's ``Style_set/``: RM-Bench-shaped style variants of its pairwise items (see INTERFACES.md).

``Style_set/<scenario id>.json`` is a JSON array of records: ``id`` (the ``pair_uid`` the record was made from),
``prompt`` (the last user turn, as RM-Bench has it), ``conversation_input`` (RMB's turns), ``chosen`` and
``rejected`` (three strings each: concise, detailed plain text, detailed markdown) and ``scenario`` (the file's
scenario id). RMB's two sets are untouched by it: a release without the folder is a plain RMB release.
Fields added for a Best-of-N item's variants (a build's ``style.bon``): ``set`` ``"bon"`` (absent: ``"pairwise"``),
``id`` then its ``bon_uid``, ``chosen`` its winner's variants and ``rejected`` those of ``loser_list[loser]``.

Strict reading (what ``rmb evaluate`` scores) refuses a record in one line naming file, record and field;
lenient reading (``rmb audit``) keeps a record whose variants are not three a side, or whose scenario field
differs from its file, for the audit to count (``release/audit/kinds/style_*.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from rmb_build.core.errors import InputError
from rmb_build.core.items import Conversation
from rmb_build.core.paths import check_relative_id
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, is_known, parse_scenario_id
from rmb_build.release.rmb_format import _conversation, _Ctx, load_json_file, turns_json

STYLE_FOLDER = "Style_set"
STYLE_SET = "style"
STYLES = ("concise", "detailed_plain", "detailed_markdown")  # RM-Bench's order of the three variants
SIDES = ("chosen", "rejected")


@dataclass(frozen=True, slots=True)
class StyleRecord:
    """One record of ``Style_set/``: the same chosen and rejected answer in RM-Bench's three styles."""

    id: str
    prompt: str
    conversation: Conversation
    chosen: tuple[str, ...]
    rejected: tuple[str, ...]
    scenario_id: str  # the file's scenario id
    file: str  # relative to the release root
    index: int  # position in its file
    scenario: str = ""  # the record's own ``scenario`` field (lenient reading keeps one that differs)
    set_name: str = PAIRWISE_SET  # BON_SET: made from the BoN item ``id``, its winner and ``loser_list[loser]``
    loser: int | None = None

    def where(self) -> str:
        return f"{self.file}, record {self.index} ({'bon ' if self.set_name == BON_SET else ''}id {self.id})"


def _ctx(file: str, index: int, raw: object) -> _Ctx:
    ctx = _Ctx(file, index, None)
    uid = raw.get("id") if isinstance(raw, dict) else None
    ctx.item = f"{index}" + (f" (id {uid})" if isinstance(uid, (str, int)) and not isinstance(uid, bool) else "")
    return ctx


def _variants(ctx: _Ctx, raw: dict, side: str, strict: bool) -> tuple[str, ...]:
    value = raw.get(side)
    if value is None:
        raise ctx.fail(side, "missing")
    if not isinstance(value, list):
        raise ctx.fail(
            side, f"expected a list of {len(STYLES)} strings ({', '.join(STYLES)}), got {type(value).__name__}"
        )
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise ctx.fail(f"{side}[{i}]", f"expected a string, got {type(v).__name__}")
    if strict and len(value) != len(STYLES):
        raise ctx.fail(side, f"expected exactly {len(STYLES)} variants ({', '.join(STYLES)}), got {len(value)}")
    return tuple(value)


def parse_record(raw: object, scenario_id: str, file: str, index: int, strict: bool = True) -> StyleRecord:
    """One record of a style file; InputError names file, record and field."""
    ctx = _ctx(file, index, raw)
    if not isinstance(raw, dict):
        raise ctx.fail(None, f"expected an object, got {type(raw).__name__}")
    uid = raw.get("id")
    if uid is None:
        raise ctx.fail("id", "missing (the pair_uid of the pairwise item the record was made from)")
    if isinstance(uid, bool) or not isinstance(uid, (str, int)):
        raise ctx.fail("id", f"expected a string or integer pair_uid, got {type(uid).__name__}")
    prompt = raw.get("prompt")
    if not isinstance(prompt, str):
        raise ctx.fail(
            "prompt", "missing" if "prompt" not in raw else f"expected a string, got {type(prompt).__name__}"
        )
    scenario = raw.get("scenario", scenario_id)
    if not isinstance(scenario, str):
        raise ctx.fail("scenario", f"expected a string, got {type(scenario).__name__}")
    if strict and scenario != scenario_id:
        raise ctx.fail("scenario", f"{scenario!r} differs from its file's scenario {scenario_id!r}")
    set_name, loser = raw.get("set", PAIRWISE_SET), raw.get("loser")
    if set_name not in (PAIRWISE_SET, BON_SET):
        raise ctx.fail("set", f"expected {PAIRWISE_SET!r} or {BON_SET!r}, got {set_name!r}")
    if set_name == BON_SET and (isinstance(loser, bool) or not isinstance(loser, int) or loser < 0):
        raise ctx.fail("loser", f"expected the index of the BoN item's loser (an integer >= 0), got {loser!r}")
    return StyleRecord(
        id=str(uid),
        prompt=prompt,
        conversation=_conversation(ctx, raw, strict),
        chosen=_variants(ctx, raw, "chosen", strict),
        rejected=_variants(ctx, raw, "rejected", strict),
        scenario_id=scenario_id,
        file=file,
        index=index,
        scenario=scenario,
        set_name=set_name,
        loser=loser if set_name == BON_SET else None,
    )


def read_style_set(root: Path, strict: bool = True, files: Sequence[Path] | None = None) -> list[StyleRecord]:
    """Every record of ``root/Style_set/`` (files sorted by path, records in file order); [] without the folder.
    ``files``: the Style_set's files as the release reader's walk found them (symbolic links followed)."""
    folder = root / STYLE_FOLDER
    if files is None:
        files = sorted(folder.rglob("*.json")) if folder.is_dir() else []
    out: list[StyleRecord] = []
    seen: dict[tuple[str, str], str] = {}
    for path in files:
        rel = path.relative_to(root).as_posix()
        scenario_id = path.relative_to(folder).with_suffix("").as_posix()
        try:
            check_relative_id(scenario_id)
        except ValueError as exc:
            raise InputError(rel, str(exc)) from None
        if strict and not is_known(scenario_id):
            raise InputError(rel, f"unknown scenario {scenario_id!r}: not one of RMB's 49")
        data = load_json_file(path, rel)
        if not isinstance(data, list):
            raise InputError(rel, f"expected a JSON list of style records, got {type(data).__name__}")
        for i, raw in enumerate(data):
            rec = parse_record(raw, scenario_id, rel, i, strict)
            if strict and (rec.set_name, rec.id) in seen:
                raise _ctx(rel, i, raw).fail("id", f"repeats the id of {seen[(rec.set_name, rec.id)]}")
            seen.setdefault((rec.set_name, rec.id), rec.where())
            out.append(rec)
    return out


def orphan_reason(rec: StyleRecord, losers: Mapping[str, Mapping[str, int]]) -> str | None:
    """Why ``rec`` is made from no item of its release (its id no item's uid of its set, or a BoN record's
    loser not in that item's loser_list), or None. ``losers``: per set, each uid's number of losers."""
    count = losers.get(rec.set_name, {}).get(rec.id)
    if count is None:
        uid = "pair_uid" if rec.set_name == PAIRWISE_SET else "bon_uid"
        return f"no {rec.set_name} item has {uid} {rec.id!r}"
    if rec.loser is not None and rec.loser >= count:
        return f"bon item {rec.id!r} has {count} losers, no loser_list[{rec.loser}]"
    return None


def style_row(rec: StyleRecord) -> dict[str, Any]:
    """The record as a row of the Hugging Face form's ``style`` configuration."""
    sc = parse_scenario_id(rec.scenario_id)
    return {
        "uid": rec.id,
        "goal": sc.goal,
        "task": sc.task_id or "",
        "scenario": rec.scenario_id,
        "prompt": rec.prompt,
        "conversation": [{"role": t.role, "content": t.content, "language": t.language} for t in rec.conversation],
        "chosen": list(rec.chosen),
        "rejected": list(rec.rejected),
        "set": rec.set_name,
        "loser": rec.loser,
    }


def record_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ``style`` row back as the record of a Style_set file, for ``parse_record`` to check as it checks one."""
    turns = turns_json(row.get("conversation"))
    return {
        "id": row.get("uid"),
        "prompt": row.get("prompt"),
        "conversation_input": turns,
        "chosen": row.get("chosen"),
        "rejected": row.get("rejected"),
        "scenario": row.get("scenario"),
        **({"set": row["set"], "loser": row.get("loser")} if row.get("set") not in (None, PAIRWISE_SET) else {}),
    }


__all__ = [
    "SIDES",
    "STYLES",
    "STYLE_FOLDER",
    "STYLE_SET",
    "StyleRecord",
    "orphan_reason",
    "parse_record",
    "read_style_set",
    "record_from_row",
    "style_row",
]


def style_file(scenario_id: str) -> str:
    """A scenario's style file, relative to the release root: ``Style_set/Helpfulness/Chat/Discussion.json``."""
    check_relative_id(scenario_id)
    return f"{STYLE_FOLDER}/{scenario_id}.json"


def style_record(
    uid: str,
    prompt: str,
    conversation: list[dict[str, Any]],
    chosen: Sequence[str],
    rejected: Sequence[str],
    scenario_id: str,
    **extra: object,
) -> dict[str, Any]:
    """One record of ``Style_set/`` in the shape :func:`parse_record` reads; ``extra``: a BoN record's ``set``
    and ``loser``."""
    return {
        "id": uid,
        "prompt": prompt,
        "conversation_input": conversation,
        "chosen": list(chosen),
        "rejected": list(rejected),
        "scenario": scenario_id,
        **extra,
    }
