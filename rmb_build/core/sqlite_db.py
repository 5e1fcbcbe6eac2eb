"""The one way this toolkit opens an SQLite file it keeps (the LLM response cache, the RM score cache):
write-ahead logging (readers never block the writer), a 60 s busy timeout (several builds or
evaluations may share one cache), ``synchronous = NORMAL`` (in WAL mode a killed process loses nothing
committed; only a power cut can lose the last commits), autocommit with explicit transactions
(:func:`transaction`), usable from several threads (each cache serialises its own calls), and the
shared reads and writes both caches need."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

BUSY_TIMEOUT_S = 60
CHUNK = 500  # keys per IN (...) query: far below SQLite's bound-parameter limit


def connect(path: str | Path, schema: str = "") -> sqlite3.Connection:
    """An open connection to ``path`` (``:memory:`` for a store that lives with the object), ``schema`` applied."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    if str(path) != ":memory:":
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
    if schema:
        db.executescript(schema)
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One committed unit of work (rolled back on an exception): many rows, one commit."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def select_in(db: sqlite3.Connection, sql: str, keys: Sequence[str], before: Sequence[Any] = ()) -> Iterable[tuple]:
    """Rows of ``sql`` (whose ``{marks}`` is filled with one ``?`` per key) for every key, chunk by chunk."""
    for start in range(0, len(keys), CHUNK):
        chunk = list(keys[start : start + CHUNK])
        yield from db.execute(sql.format(marks=",".join("?" * len(chunk))), (*before, *chunk))
