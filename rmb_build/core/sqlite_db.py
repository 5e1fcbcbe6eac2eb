"""The one way this toolkit opens an SQLite file it keeps (the LLM response cache, the RM score cache):
write-ahead logging (readers never block the writer), a 60 s busy timeout (several builds or
evaluations may share one cache), ``synchronous = NORMAL`` (in WAL mode a killed process loses nothing
committed; only a power cut can lose the last commits), autocommit with explicit transactions
(:func:`transaction`), usable from several threads (each cache serialises its own calls), and the
shared reads and writes both caches need. A damaged file, a full disk or a read-only place is an
RMBError naming the file (with the owner's advice on recovery), not a traceback."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from rmb_build.core.errors import RMBError

BUSY_TIMEOUT_S = 60
CHUNK = 500  # keys per IN (...) query: far below SQLite's bound-parameter limit
DAMAGED_HINT = "delete it (with its -wal and -shm files) to start afresh"
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_CANNOT_WRITE = {
    sqlite3.SQLITE_FULL: "disk full",
    sqlite3.SQLITE_READONLY: "read-only",
    sqlite3.SQLITE_CANTOPEN: "cannot open",
    sqlite3.SQLITE_IOERR: "input/output error",
    sqlite3.SQLITE_PERM: "permission denied",
}


def _user_error(exc: sqlite3.Error, path: str, hint: str) -> RMBError | None:
    """One line for what a user can fix: a damaged file (``hint``: how to recover) or a place we cannot write."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code of an extended one
    if code in _DAMAGED:
        return RMBError(f"{path}: the SQLite file is damaged ({exc}); {hint}")
    if code in _CANNOT_WRITE:
        return RMBError(f"{path}: {_CANNOT_WRITE[code]} ({exc})")
    return None


@contextmanager
def _named(path: str, hint: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        error = _user_error(exc, path, hint)
        if error is None:
            raise
        raise error from exc


class _Cursor(sqlite3.Cursor):
    """Every statement and fetch (where SQLite meets a damaged page) turns such errors into one line."""

    def _guard(self):
        return _named(self.connection.rmb_path, self.connection.rmb_hint)

    def execute(self, *args):
        with self._guard():
            return super().execute(*args)

    def executemany(self, *args):
        with self._guard():
            return super().executemany(*args)

    def executescript(self, *args):
        with self._guard():
            return super().executescript(*args)

    def fetchone(self):
        with self._guard():
            return super().fetchone()

    def fetchmany(self, *args):
        with self._guard():
            return super().fetchmany(*args)

    def fetchall(self):
        with self._guard():
            return super().fetchall()

    def __next__(self):
        with self._guard():
            return super().__next__()


class _Connection(sqlite3.Connection):
    rmb_path, rmb_hint = "", DAMAGED_HINT

    def cursor(self, factory=None):
        return super().cursor(factory or _Cursor)

    # sqlite3.Connection's own shortcuts bypass an overridden cursor(): route them through it
    def execute(self, *args):
        return self.cursor().execute(*args)

    def executemany(self, *args):
        return self.cursor().executemany(*args)

    def executescript(self, *args):
        return self.cursor().executescript(*args)


def connect(path: str | Path, schema: str = "", damaged_hint: str = DAMAGED_HINT) -> sqlite3.Connection:
    """An open connection to ``path`` (``:memory:`` for a store that lives with the object), ``schema`` applied.

    A damaged file (``damaged_hint``: how its owner recovers) or one that cannot be written raises RMBError
    naming ``path``, here or at any later statement."""
    with _named(str(path), damaged_hint):
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False, factory=_Connection
        )
    db.rmb_path, db.rmb_hint = str(path), damaged_hint
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
        if db.in_transaction:  # SQLite has rolled back already after some errors (a full disk)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def select_in(db: sqlite3.Connection, sql: str, keys: Sequence[str], before: Sequence[Any] = ()) -> Iterable[tuple]:
    """Rows of ``sql`` (whose ``{marks}`` is filled with one ``?`` per key) for every key, chunk by chunk."""
    for start in range(0, len(keys), CHUNK):
        chunk = list(keys[start : start + CHUNK])
        yield from db.execute(sql.format(marks=",".join("?" * len(chunk))), (*before, *chunk))
