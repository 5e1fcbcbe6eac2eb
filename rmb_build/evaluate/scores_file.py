"""Scores computed elsewhere (``rmb evaluate --scores FILE``): read them, match them to a release's items by
``(set, uid)``, and turn them into predictions by the same rules as scores computed here.

Two formats, told apart by content (a file that fits neither is refused with one line):

- ``rmb-result``: RMB's own result file, the JSON list that RMB's ``eval/scripts/my_run_rm.py`` writes
  (``--results <model>_result.json``), one object per pair: ``pair_uid``, ``category_path``,
  ``chosen_reward``, ``reject_reward``, ``is_correct``. Its pair-comparing models (PairRM and the like)
  write ``null`` rewards and only ``is_correct``; such a pair takes ``is_correct`` as its outcome.
  RMB's published code writes no BoN result file; BoN rows in the same shape are read as ``bon_uid``,
  ``category_path``, ``bon_best_reward``, ``loser_list_reward`` (a list, in ``loser_list`` order).
- ``jsonl``: one object a line, ``{"set": "pairwise", "uid", "chosen", "rejected"}`` or
  ``{"set": "bon", "uid", "best", "losers": [...]}``, optionally with ``category_path``.

A folder is read as every ``.json`` / ``.jsonl`` file under it. Release items the file lacks are listed and
left out of the figures (they are not counted as losses); so are items whose ``category_path`` or number of
losers differs from the release's. Rows naming no item of the release are counted (the first few listed).

The files are streamed: only the rows of the release's items are kept, so memory follows the release, not the
file (``bench/scores_file_memory.py``). A second row for an item is refused, naming both lines.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from rmb_build.core.errors import InputError, RMBError, closest
from rmb_build.core.finite import describe, finite_float
from rmb_build.core.items import BonItem, Item, default_category_path
from rmb_build.core.jsonl import TOO_MANY_DIGITS, read_jsonl_objects
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.evaluate.outcomes import predict

FORMATS = ("rmb-result", "jsonl")
LISTED = 20  # items named per list in results.json; the count is always complete
RMB_FIELDS = {
    PAIRWISE_SET: ("pair_uid", "chosen_reward", "reject_reward"),
    BON_SET: ("bon_uid", "bon_best_reward", "loser_list_reward"),
}
JSONL_FIELDS = {PAIRWISE_SET: ("chosen", "rejected"), BON_SET: ("best", "losers")}


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One item's scores as the file gives them, chosen (or best) first, as ``Item.answers()`` orders them.

    ``outcome`` is RMB's ``is_correct`` where its rewards are null (a pair-comparing RM): the outcome itself.
    """

    set_name: str
    uid: str
    scores: tuple[float | None, ...]
    file: str
    line: int
    category_path: str | None = None
    is_correct: int | None = None

    @property
    def outcome(self) -> float | None:
        return float(self.is_correct) if None in self.scores and self.is_correct is not None else None

    def ref(self) -> dict[str, Any]:
        return {"set": self.set_name, "uid": self.uid, "file": self.file, "line": self.line}


@dataclass
class ScoresFile:
    """A scores file or folder, hashed and its format told; its rows are streamed by ``iter_rows``."""

    path: str
    format: str
    sha256: str
    files: list[tuple[str, str]]  # (name, sha256) of each file read
    paths: list[tuple[Path, str]] = field(default_factory=list)  # (file, its format), in reading order


# --- reading ----------------------------------------------------------------------------------------------------

CHUNK = 1 << 20  # bytes read at a time


def read_scores(path: str | Path) -> ScoresFile:
    """A scores file (or every ``.json``/``.jsonl`` file under a folder), hashed and each file's format told
    from its first character; InputError names the file of neither format. No row is held: ``iter_rows``."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
        if not files:
            raise RMBError(f"--scores {path}: the folder holds no .json or .jsonl file")
    elif path.is_file():
        files = [path]
    else:
        raise RMBError(f"--scores {path}: no such file or folder")
    digests, paths = [], []
    for file in files:
        digests.append((file.relative_to(path).as_posix() if path.is_dir() else file.name, _sha256(file)))
        paths.append((file, _format_of(file)))
    # A file's own sha256 (what sha256sum prints); a folder's: over its files' names and sha256s.
    sha = (
        digests[0][1]
        if path.is_file()
        else hashlib.sha256("".join(f"{name}\0{digest}\n" for name, digest in digests).encode("utf-8")).hexdigest()
    )
    return ScoresFile(str(path), "+".join(sorted({f for _, f in paths})), sha, digests, paths)


def iter_rows(scores: ScoresFile) -> Iterator[ScoreRow]:
    """Every row of every file, checked, in file order; InputError names the file, line and field of the first
    bad one. Nothing is held beyond the row being read."""
    for file, fmt in scores.paths:
        if fmt == "rmb-result":
            for i, (line, obj) in enumerate(_json_list(file)):
                yield _rmb_row(file, line, i, obj)
        else:
            for line, obj in read_jsonl_objects(file):
                yield _jsonl_row(file, line, obj)


def _sha256(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _format_of(file: Path) -> str:
    """``rmb-result`` (a JSON list) or ``jsonl``, from the first character that is not white space."""
    skipped = ""
    for text in _texts(file):
        body = text.lstrip()
        if body:
            if body[0] == "[":
                return "rmb-result"
            if body[0] == "{":
                return "jsonl"
            skipped += text[: len(text) - len(body)]
            break
        skipped += text
    raise InputError(
        str(file),
        "neither RMB's result file (a JSON list) nor JSONL of scores (one object a line)",
        line=skipped.count("\n") + 1,
    )


def _texts(file: Path) -> Iterator[str]:
    """The file's text in pieces of about ``CHUNK`` bytes (UTF-8, a leading BOM dropped); InputError names the
    line and byte of invalid UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    offset = lines = 0
    with open(file, "rb") as fh:
        while True:
            data = fh.read(CHUNK)
            pending = decoder.getstate()[0]
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                seen = (pending + data)[: exc.start]
                raise InputError(
                    str(file),
                    f"invalid UTF-8 at byte {offset - len(pending) + exc.start}",
                    line=lines + seen.count(b"\n") + 1,
                ) from None
            offset += len(data)
            lines += data.count(b"\n")
            if text:
                yield text
            if not data:
                return


_WS = re.compile(r"[ \t\n\r]*")
TAIL = 64  # a decode error this close to the end of what is read may be a value cut by the read: read more


class _Stream:
    """A JSON text read piece by piece: ``buf`` from ``pos`` is what is not consumed yet; ``line`` is the line
    of ``buf[pos]``, ``column0`` the column of ``buf[0]`` (0-based)."""

    def __init__(self, file: Path):
        self.file, self.pieces, self.buf, self.pos, self.line, self.column0 = file, _texts(file), "", 0, 1, 0
        self.eof = False

    def more(self) -> bool:
        """Append the next piece (dropping what is consumed); False at the end of the file."""
        if self.eof:
            return False
        consumed = self.buf[: self.pos]
        newline = consumed.rfind("\n")
        self.column0 = len(consumed) - newline - 1 if newline >= 0 else self.column0 + len(consumed)
        self.buf = self.buf[self.pos :]
        self.pos = 0
        piece = next(self.pieces, None)
        if piece is None:
            self.eof = True
            return False
        self.buf += piece
        return True

    def skip_ws(self) -> str:
        """The next character that is not white space ("" at the end of the file)."""
        while True:
            blank = _WS.match(self.buf, self.pos)
            assert blank is not None  # white space matches anywhere, if only the empty string
            end = blank.end()
            self.line += self.buf.count("\n", self.pos, end)
            self.pos = end
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def fail(self, message: str, at: int | None = None) -> InputError:
        at = self.pos if at is None else at
        line = self.line + self.buf.count("\n", self.pos, at)
        newline = self.buf.rfind("\n", 0, at)
        column = at - newline if newline >= 0 else self.column0 + at + 1
        return InputError(str(self.file), f"invalid JSON: {message} (column {column})", line=line)

    def value(self, decoder: json.JSONDecoder) -> object:
        """The JSON value at ``pos``, reading more of the file where it may run past what is read."""
        while True:
            try:
                value, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                near_end = exc.pos >= len(self.buf) - TAIL or exc.msg.startswith("Unterminated string")
                if near_end and not self.eof:
                    self.more()  # (at the end of the file it only drops what is consumed)
                    continue
                raise self.fail(exc.msg, exc.pos) from None
            except ValueError:  # an integer of more digits than Python converts
                raise InputError(str(self.file), TOO_MANY_DIGITS, line=self.line) from None
            if end > len(self.buf) - TAIL and not self.eof:
                self.more()  # a number may go on in the next piece: decode it again with more read
                continue
            self.line += self.buf.count("\n", self.pos, end)
            self.pos = end
            return value


def _json_list(file: Path) -> Iterator[tuple[int, object]]:
    """(line, element) of a JSON list, each element with the line it starts on, read piece by piece."""
    s, decoder = _Stream(file), json.JSONDecoder()
    s.skip_ws()
    s.pos += 1  # the "[" _format_of found
    if s.skip_ws() == "]":
        s.pos += 1
    else:
        while True:
            if s.skip_ws() == "":
                raise s.fail("Expecting value")
            line = s.line
            yield line, s.value(decoder)
            after = s.skip_ws()
            if after == "]":
                s.pos += 1
                break
            if after != ",":
                raise s.fail("Expecting ',' delimiter")
            s.pos += 1
    if s.skip_ws() != "":
        raise s.fail("Extra data")


def _number(
    file: Path, line: int, item: str | int | None, field: str, value: object, nullable: bool = False
) -> float | None:
    if value is None and nullable:
        return None
    number = finite_float(value)
    if number is None:
        raise InputError(
            str(file), f"expected a finite number, got {describe(value)}", line=line, item=item, field=field
        )
    return number


def _uid(file: Path, line: int, item: str | int | None, field: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise InputError(str(file), "expected a non-empty string or integer uid", line=line, item=item, field=field)
    return str(value)


def _category(file: Path, line: int, item: str | int | None, obj: dict[str, object], required: bool) -> str | None:
    value = obj.get("category_path")
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(
            str(file),
            "expected the item's category_path (e.g. Pairwise_set/Harmlessness/S6)",
            line=line,
            item=item,
            field="category_path",
        )
    return value


def _numbers(file: Path, line: int, item: str | int | None, field: str, value: object) -> list[float]:
    if not isinstance(value, list) or not value:
        raise InputError(str(file), "expected a non-empty list of numbers", line=line, item=item, field=field)
    return [_number(file, line, item, f"{field}[{k}]", v) for k, v in enumerate(value)]  # type: ignore[misc]


def _missing(field: str, obj: dict) -> str:
    """A missing field's message: ``missing`` and the row's field that may be it misspelt."""
    near = closest(field, (k for k in obj if k != field))
    return "missing" + (f" (the row has {near!r}: misspelt?)" if near else "")


def _rmb_row(file: Path, line: int, index: int, obj: object) -> ScoreRow:
    """A row of RMB's result file (``pair_uid`` ...; BoN rows ``bon_uid`` ...)."""
    if not isinstance(obj, dict):
        raise InputError(str(file), f"expected an object, got {type(obj).__name__}", line=line, item=index)
    kinds = [s for s, fields in RMB_FIELDS.items() if fields[0] in obj]
    if len(kinds) != 1:
        raise InputError(
            str(file),
            "expected exactly one of 'pair_uid' (pairwise) or 'bon_uid' (BoN)",
            line=line,
            item=index,
            field="pair_uid",
        )
    set_name = kinds[0]
    uid_field, best_field, rest_field = RMB_FIELDS[set_name]
    uid = _uid(file, line, index, uid_field, obj[uid_field])
    category = _category(file, line, index, obj, required=True)
    if set_name == BON_SET:
        scores = (
            _number(file, line, index, best_field, obj.get(best_field)),
            *_numbers(file, line, index, rest_field, obj.get(rest_field)),
        )
        return ScoreRow(set_name, uid, scores, str(file), line, category)
    for f in (best_field, rest_field):
        if f not in obj:
            raise InputError(str(file), _missing(f, obj), line=line, item=index, field=f)
    scores = tuple(_number(file, line, index, f, obj[f], nullable=True) for f in (best_field, rest_field))
    correct = obj.get("is_correct")
    if correct is not None and correct not in (0, 1):
        raise InputError(str(file), "expected 0 or 1", line=line, item=index, field="is_correct")
    if None in scores and (scores != (None, None) or correct is None):
        raise InputError(
            str(file),
            "a null reward needs the other reward null too and 'is_correct' 0 or 1 "
            "(RMB's rows for pair-comparing models)",
            line=line,
            item=index,
            field=best_field if scores[0] is None else rest_field,
        )
    return ScoreRow(set_name, uid, scores, str(file), line, category, None if correct is None else int(correct))


def _jsonl_row(file: Path, line: int, obj: dict) -> ScoreRow:
    """A line of the JSONL format: ``set``, ``uid`` and the scores."""
    set_name = obj.get("set")
    if set_name not in JSONL_FIELDS:
        raise InputError(
            str(file), f"expected 'pairwise' or 'bon', got {json.dumps(set_name)[:40]}", line=line, field="set"
        )
    uid = _uid(file, line, None, "uid", obj.get("uid"))
    first, rest = JSONL_FIELDS[set_name]
    for f in (first, rest):
        if f not in obj:  # a misspelt field ('rejcted') is named with the field it stands for
            raise InputError(str(file), _missing(f, obj), line=line, field=f)
    head = _number(file, line, None, first, obj.get(first))
    tail = (
        _numbers(file, line, None, rest, obj.get(rest))
        if set_name == BON_SET
        else [_number(file, line, None, rest, obj.get(rest))]
    )
    return ScoreRow(set_name, uid, (head, *tail), str(file), line, _category(file, line, None, obj, required=False))


# --- matching ---------------------------------------------------------------------------------------------------


def _category_of(item: Item) -> str:
    return item.category_path or default_category_path(item.set_name, item.scenario_id)


def _take(queue: list[ScoreRow], category: str) -> ScoreRow | None:
    """The first row of ``queue`` for an item in ``category`` (one naming no category will do), else the first."""
    for k, row in enumerate(queue):
        if row.category_path in (None, category):
            return queue.pop(k)
    return queue.pop(0) if queue else None


def _mismatch(row: ScoreRow, item: Item) -> dict[str, Any] | None:
    """Why ``row`` cannot be ``item``'s scores (a different category_path or number of losers), or None."""
    if row.category_path is not None and row.category_path != _category_of(item):
        return {
            **row.ref(),
            "field": "category_path",
            "file_value": row.category_path,
            "release_value": _category_of(item),
        }
    if isinstance(item, BonItem) and len(row.scores) - 1 != len(item.losers):
        return {**row.ref(), "field": "losers", "file_value": len(row.scores) - 1, "release_value": len(item.losers)}
    return None


def _listed(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"count": len(entries), "items": list(entries[:LISTED])}


@dataclass
class Matched:
    """Which file row scores which item, and what did not match (results.json ``scores_file``)."""

    rows: dict[int, ScoreRow]  # id(item) -> its row
    listing: dict[str, Any]


def _duplicate(first: ScoreRow, again: ScoreRow) -> InputError:
    """One line naming the uid given twice and both rows' lines."""
    where = f"line {first.line}" + ("" if first.file == again.file else f" of {first.file}")
    return InputError(
        again.file,
        f"{again.set_name} uid {again.uid!r} is given twice ({where} and line {again.line}): one row per item, "
        "or the figure would depend on which row is read",
        line=again.line,
    )


def _collect(scores: ScoresFile, release_items: Sequence[Item]) -> tuple[dict, int, int, list[ScoreRow]]:
    """Stream the rows: (the rows of the release's items, by (set, uid), in file order; rows read; rows naming no
    item of the release; the first ``LISTED`` of those). A (set, uid) given more often than the release has
    items of it is refused."""
    in_release = Counter((it.set_name, str(it.uid)) for it in release_items)
    queues: dict[tuple[str, str], list[ScoreRow]] = {}
    n_rows = n_foreign = 0
    foreign: list[ScoreRow] = []
    for row in iter_rows(scores):
        n_rows += 1
        key = (row.set_name, row.uid)
        have = in_release.get(key)
        if have is None:
            n_foreign += 1
            if len(foreign) < LISTED:
                foreign.append(row)
            continue
        queue = queues.setdefault(key, [])
        if len(queue) >= have:
            first = next((r for r in queue if r.category_path == row.category_path), queue[0])
            raise _duplicate(first, row)
        queue.append(row)
    if not n_rows:
        raise InputError(scores.path, "holds no scores")
    return queues, n_rows, n_foreign, foreign


def match(scores: ScoresFile, release_items: Sequence[Item], scored: Sequence[Item]) -> Matched:
    """Pair the file's rows with ``scored`` (the release's items to score; ``release_items``: all of them).

    Rows pair up by ``(set, uid)`` in file order, preferring one whose ``category_path`` is the item's. A row of
    an item left out of scoring (``--skip-defective``) is neither used nor listed as foreign.
    """
    queues, n_rows, n_foreign, foreign = _collect(scores, release_items)
    wanted = {id(it) for it in scored}
    rows, missing, mismatched, skipped = {}, [], [], 0
    for item in release_items:
        row = _take(queues.get((item.set_name, str(item.uid)), []), _category_of(item))
        if id(item) not in wanted:
            skipped += row is not None
        elif row is None:
            missing.append({"set": item.set_name, "uid": str(item.uid), "scenario": item.scenario_id})
        elif (problem := _mismatch(row, item)) is not None:
            mismatched.append(problem)
        else:
            rows[id(item)] = row
    left = sorted((r for q in queues.values() for r in q), key=lambda r: (r.file, r.line))
    disagree = [
        r.ref()
        for r in rows.values()
        if r.is_correct is not None and r.outcome is None and r.is_correct != int(r.scores[0] > r.scores[1])  # type: ignore[operator]  # no outcome: both rewards are numbers
    ]
    listing = {
        "path": scores.path,
        "format": scores.format,
        "sha256": scores.sha256,
        **({"files": [{"name": n, "sha256": d} for n, d in scores.files]} if Path(scores.path).is_dir() else {}),
        "rows": n_rows,
        "matched": len(rows),
        "outcome_only": sum(r.outcome is not None for r in rows.values()),
        "missing_in_file": _listed(missing),
        "not_in_release": {"count": n_foreign, "items": [r.ref() for r in foreign]},
        "repeated": _listed([r.ref() for r in left]),  # none: a second row for an item is refused
        "mismatched": _listed(mismatched),
        "is_correct_disagrees": _listed(disagree),
        "skipped_defective_rows": skipped,
        "unmatched_items": "left out of the figures",
    }
    return Matched(rows, listing)


def predictions(
    scores: ScoresFile, release_items: Sequence[Item], scored: Sequence[Item], ties: str
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(predictions.jsonl rows of the matched items, results.json ``scoring``, results.json ``scores_file``).

    The items the file scores go through ``outcomes.predict`` exactly as scores computed here; a pair with
    RMB's ``is_correct`` only takes it as its outcome (``outcome_from``: ``is_correct``).
    """
    m = match(scores, release_items, scored)
    items = [it for it in scored if id(it) in m.rows]
    if not items:
        raise RMBError(
            f"{summary_line(m.listing)}: no row of the file scores an item of this release "
            "(is it the release the scores were computed on?)"
        )
    keys = [[f"{n}:{k}" for k in range(len(it.answers()))] for n, it in enumerate(items)]
    values = {key: score for it, ks in zip(items, keys) for key, score in zip(ks, m.rows[id(it)].scores)}
    rows = predict(items, keys, values, ties=ties)
    for it, row in zip(items, rows):
        outcome = m.rows[id(it)].outcome
        if outcome is not None:
            row.pop("failed", None)
            row.update(outcome=outcome, outcome_from="is_correct")
    n_scores = sum(len(k) for k in keys)
    scoring = {"naive": 0, "unique": 0, "cached": 0, "scored": 0, "failed": 0, "from_file": n_scores}
    return rows, scoring, m.listing


def summary_line(listing: dict[str, Any]) -> str:
    """One line for stderr: what matched and what did not."""
    parts = [f"scores file {listing['path']} ({listing['format']}): {listing['matched']} items matched"]
    for key, words in (
        ("missing_in_file", "release items not in the file (left out of the figures)"),
        ("mismatched", "rows that differ from their item (left out)"),
        ("not_in_release", "rows for no item of the release"),
        ("repeated", "repeated rows"),
        ("is_correct_disagrees", "rows whose is_correct disagrees with their rewards"),
    ):
        if listing[key]["count"]:
            first = listing[key]["items"][0]
            parts.append(f"{listing[key]['count']} {words}, e.g. {first['set']} {first['uid']}")
    if listing["outcome_only"]:
        parts.append(f"{listing['outcome_only']} pairs scored by is_correct only")
    return "; ".join(parts)
