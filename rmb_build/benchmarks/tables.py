"""Rows of a benchmark given as tables: local JSON / JSON Lines / Parquet files, a folder of them, or a
Hugging Face Hub id read through ``datasets``. Each row remembers where it came from, so that a reader
can name the file, the row and the field of bad input."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.jsonl import iter_jsonl
from rmb_build.core.walk import ReadAccount, walk_files
from rmb_build.release.rmb_format import load_json_file

TABLE_SUFFIXES = (".json", ".jsonl", ".parquet")
HUB_SPLITS = ("test", "filtered")  # RewardBench ships its pairs as the "filtered" split


@dataclass(frozen=True)
class Row:
    """One record of a table. ``index`` counts rows within the file; ``line`` is set for JSON Lines;
    ``table`` is the name of the file the row came from (``chat_filtered.json``), None for Hub rows."""

    file: str
    index: int
    data: dict[str, Any]
    line: int | None = None
    table: str | None = None

    def fail(self, field: str | None, message: str) -> InputError:
        """An InputError naming this row's file, row (or line) and ``field``."""
        uid = self.data.get("id")
        item = f"{self.index}" + (f" (id {uid})" if isinstance(uid, (str, int)) and not isinstance(uid, bool) else "")
        return InputError(self.file, message, item=item, field=field, line=self.line)


def _json_rows(path: Path, display: str) -> list[Row]:
    data = load_json_file(path, display)
    if not isinstance(data, list):
        raise InputError(display, f"expected a JSON list of records, got {type(data).__name__}")
    return [_record(display, i, raw, table=path.name) for i, raw in enumerate(data)]


def _jsonl_rows(path: Path, display: str) -> list[Row]:
    rows: list[Row] = []
    for n, raw in iter_jsonl(path):
        rows.append(_record(display, len(rows), raw, line=n, table=path.name))
    return rows


def _parquet_rows(path: Path, display: str) -> list[Row]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.read_table(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
        raise InputError(display, f"not a readable Parquet file: {str(exc).splitlines()[0]}") from None
    return [_record(display, i, raw, table=path.name) for i, raw in enumerate(parquet.to_pylist())]


def _record(display: str, index: int, raw: object, line: int | None = None, table: str | None = None) -> Row:
    if not isinstance(raw, dict):
        raise InputError(display, f"expected a record (object), got {type(raw).__name__}", item=index, line=line)
    return Row(display, index, raw, line, table)


def table_files(path: Path, account: ReadAccount | None = None) -> list[Path]:
    """The table files of ``path``: itself, or every JSON/JSONL/Parquet file under it (symbolic links
    followed, hidden entries skipped: ``core/walk.py``); ``account`` notes what was skipped and why."""
    if path.is_file():
        return [path]
    seen, skipped = walk_files(path)
    files = []
    for file in seen:
        if file.path.suffix in TABLE_SUFFIXES:
            files.append(file.path)
            if account is not None:
                account.read.append(file.rel)
                account.linked += file.linked
        else:
            skipped.append((file.rel, f"not a {', '.join(TABLE_SUFFIXES)} file"))
    if account is not None:
        account.skipped += skipped
    return files


def file_rows(file: Path, display: str) -> list[Row]:
    """The rows of one table file, by its suffix."""
    if file.suffix == ".jsonl":
        return _jsonl_rows(file, display)
    if file.suffix == ".parquet":
        return _parquet_rows(file, display)
    if file.suffix == ".json":
        return _json_rows(file, display)
    raise InputError(display, f"unsupported file type {file.suffix or '(none)'!r} (expected .json, .jsonl or .parquet)")


def local_rows(path: Path, account: ReadAccount | None = None) -> list[Row]:
    """Every row of a table file or of the table files under a folder, file by file (``account``: what
    was read and skipped)."""
    account = account if account is not None else ReadAccount(str(path))
    files = table_files(path, account)
    if not files:
        skipped = f" ({account.summary()})" if account.skipped else ""
        raise InputError(
            str(path),
            "holds no release or benchmark: no Pairwise_set/ or BoN_set/ folder, no Hugging Face form, "
            f"and no .json, .jsonl or .parquet files found{skipped}",
        )
    rows: list[Row] = []
    for file in files:
        display = str(file) if file == path else str(path / file.relative_to(path))
        rows += file_rows(file, display)
    if not rows:
        raise InputError(str(path), "holds no records")
    if path.is_file():
        account.read = [path.name]
    account.records = len(rows)
    return rows


def hub_rows(repo_id: str) -> list[Row]:
    """The rows of a Hub dataset's default configuration: its ``test`` (or ``filtered``) split, or its only split."""
    from datasets import load_dataset
    from huggingface_hub.constants import HF_HUB_OFFLINE

    try:
        splits = load_dataset(repo_id)
    except Exception as exc:  # datasets raises many types (DatasetNotFoundError, ConnectionError, ...)
        hint = (
            " (HF_HUB_OFFLINE is set: only datasets already in the local cache can be read)" if HF_HUB_OFFLINE else ""
        )
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise RMBError(
            f"{repo_id}: cannot load from the Hugging Face Hub: {type(exc).__name__}: {first}{hint}"
        ) from None
    names = list(splits)
    split = next((s for s in HUB_SPLITS if s in names), names[0] if len(names) == 1 else None)
    if split is None:
        raise InputError(repo_id, f"several splits ({', '.join(names)}) and none named {' or '.join(HUB_SPLITS)}")
    where = f"{repo_id} [{split}]"
    return [_record(where, i, raw) for i, raw in enumerate(splits[split])]


__all__ = ["Row", "file_rows", "hub_rows", "local_rows", "table_files"]
