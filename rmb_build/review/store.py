"""``review.db``: the plan (which release, who sees which items in which order, each item's answer order)
and every label, in SQLite (``core.sqlite_db``: WAL, each label one committed transaction before the
next page is served), so a server killed at any moment resumes every annotator where they stopped.

Tables: ``meta`` (the release's name, path and sha256 — the identity ``results.json`` records —, the
sampling settings, the page's CSRF secret), ``annotators`` (name, sha256 of their token where the server
is reachable beyond loopback), ``items`` (every planned or imported item: set, uid, scenario),
``assignments`` (annotator, position, item, shared or not, answer order shown), ``views`` (when an
annotator's item was last shown: the time spent is measured from there), ``labels`` (one per set, uid
and annotator: a new label replaces the earlier one; ``seq`` orders them for undo).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

from rmb_build.core import sqlite_db
from rmb_build.core.errors import RMBError
from rmb_build.release.provenance import release_sha256
from rmb_build.release.read import Release
from rmb_build.release.review_labels import Label
from rmb_build.review.sample import ItemKey

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS annotators (name TEXT PRIMARY KEY, position INTEGER NOT NULL, token_hash TEXT);
CREATE TABLE IF NOT EXISTS items (
    set_name TEXT NOT NULL, uid TEXT NOT NULL, scenario TEXT NOT NULL, PRIMARY KEY (set_name, uid));
CREATE TABLE IF NOT EXISTS assignments (
    annotator TEXT NOT NULL, pos INTEGER NOT NULL, set_name TEXT NOT NULL, uid TEXT NOT NULL,
    shared INTEGER NOT NULL, answer_order TEXT NOT NULL, PRIMARY KEY (annotator, pos));
CREATE TABLE IF NOT EXISTS views (
    annotator TEXT NOT NULL, pos INTEGER NOT NULL, shown_at REAL NOT NULL, PRIMARY KEY (annotator, pos));
CREATE TABLE IF NOT EXISTS labels (
    set_name TEXT NOT NULL, uid TEXT NOT NULL, annotator TEXT NOT NULL, choice TEXT NOT NULL,
    shown TEXT, flags TEXT NOT NULL, note TEXT NOT NULL, time TEXT NOT NULL, seconds REAL,
    seq INTEGER NOT NULL, source TEXT NOT NULL, PRIMARY KEY (set_name, uid, annotator));
CREATE INDEX IF NOT EXISTS labels_seq ON labels (annotator, seq);
"""
# unlike the caches, it holds what people did: never advise deleting it
DAMAGED_HINT = "it holds the review's labels: restore it from a backup, or try 'sqlite3 FILE .recover'"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Assignment:
    """One item in one annotator's queue: its position, the item, whether everyone has it, the answer order."""

    annotator: str
    pos: int
    key: ItemKey
    shared: bool
    order: tuple[int, ...]


class ReviewStore:
    """One ``review.db``; every method is one transaction (safe from the server's threads)."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self.db = sqlite_db.connect(self.path, SCHEMA, DAMAGED_HINT)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    # -- the plan --------------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self.db.execute("SELECT key, value FROM meta"))

    def check_release(self, release: Release) -> str:
        """The release's sha256 (``results.json``'s identity), once it is known to be the one reviewed."""
        sha = release_sha256(release)
        meta = self.meta()
        if meta.get("release_sha256") and meta["release_sha256"] != sha:
            raise RMBError(
                f"{self.path}: holds the review of release {meta.get('release_name')} (sha256 "
                f"{meta['release_sha256'][:12]}), not of {release.name} (sha256 {sha[:12]})"
            )
        return sha

    def planned(self) -> bool:
        with self._lock:
            return self.db.execute("SELECT 1 FROM assignments LIMIT 1").fetchone() is not None

    def plan(self, meta: dict[str, str], queues: dict[str, list[tuple[ItemKey, bool, Sequence[int]]]]) -> None:
        """Record the release, the settings and every annotator's queue, in one transaction."""
        with self._lock, sqlite_db.transaction(self.db) as db:
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(meta.items()))
            for position, (name, queue) in enumerate(queues.items()):
                db.execute("INSERT OR IGNORE INTO annotators (name, position) VALUES (?, ?)", (name, position))
                db.executemany(
                    "INSERT OR IGNORE INTO items VALUES (?, ?, ?)", [(k.set, k.uid, k.scenario) for k, _, _ in queue]
                )
                db.executemany(
                    "INSERT INTO assignments VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (name, pos, k.set, k.uid, int(shared), json.dumps(list(order)))
                        for pos, (k, shared, order) in enumerate(queue)
                    ],
                )

    def add_items(self, keys: Iterable[ItemKey]) -> None:
        with self._lock, sqlite_db.transaction(self.db) as db:
            db.executemany("INSERT OR IGNORE INTO items VALUES (?, ?, ?)", [(k.set, k.uid, k.scenario) for k in keys])

    def items(self) -> dict[tuple[str, str], ItemKey]:
        with self._lock:
            rows = self.db.execute("SELECT set_name, uid, scenario FROM items").fetchall()
        return {(s, u): ItemKey(s, u, sc) for s, u, sc in rows}

    def annotators(self) -> list[str]:
        with self._lock:
            return [n for (n,) in self.db.execute("SELECT name FROM annotators ORDER BY position")]

    def token_hashes(self) -> dict[str, str | None]:
        with self._lock:
            return dict(self.db.execute("SELECT name, token_hash FROM annotators"))

    def set_token_hash(self, name: str, token_hash: str) -> None:
        with self._lock, sqlite_db.transaction(self.db) as db:
            db.execute("UPDATE annotators SET token_hash = ? WHERE name = ?", (token_hash, name))

    # -- an annotator's queue ----------------------------------------------------------------------

    def _assignment(self, row) -> Assignment:
        annotator, pos, set_name, uid, shared, order, scenario = row
        return Assignment(annotator, pos, ItemKey(set_name, uid, scenario), bool(shared), tuple(json.loads(order)))

    _ASSIGNMENT = (
        "SELECT a.annotator, a.pos, a.set_name, a.uid, a.shared, a.answer_order, i.scenario FROM assignments a "
        "JOIN items i ON i.set_name = a.set_name AND i.uid = a.uid "
    )

    def current(self, annotator: str) -> Assignment | None:
        """The first item of the annotator's queue they have not labelled (None: all done)."""
        with self._lock:
            row = self.db.execute(
                self._ASSIGNMENT + "WHERE a.annotator = ? AND NOT EXISTS (SELECT 1 FROM labels l WHERE "
                "l.set_name = a.set_name AND l.uid = a.uid AND l.annotator = a.annotator) ORDER BY a.pos LIMIT 1",
                (annotator,),
            ).fetchone()
        return None if row is None else self._assignment(row)

    def assignment(self, annotator: str, pos: int) -> Assignment | None:
        with self._lock:
            row = self.db.execute(self._ASSIGNMENT + "WHERE a.annotator = ? AND a.pos = ?", (annotator, pos)).fetchone()
        return None if row is None else self._assignment(row)

    def progress(self, annotator: str) -> tuple[int, int]:
        """(items of the queue labelled, items in the queue)."""
        with self._lock:
            total = self.db.execute("SELECT COUNT(*) FROM assignments WHERE annotator = ?", (annotator,)).fetchone()[0]
            done = self.db.execute(
                "SELECT COUNT(*) FROM assignments a JOIN labels l ON l.set_name = a.set_name AND l.uid = a.uid "
                "AND l.annotator = a.annotator WHERE a.annotator = ?",
                (annotator,),
            ).fetchone()[0]
        return done, total

    def shown(self, annotator: str, pos: int) -> None:
        """Note that the item was just shown (the time spent on it counts from the last showing)."""
        with self._lock, sqlite_db.transaction(self.db) as db:
            db.execute("INSERT OR REPLACE INTO views VALUES (?, ?, ?)", (annotator, pos, time.time()))

    # -- labels ----------------------------------------------------------------------------------

    def save(self, label: Label, *, shown: str | None = None, pos: int | None = None, source: str = "page") -> Label:
        """Commit ``label`` (replacing the annotator's earlier label of the item); the time spent is
        measured from the item's last showing at ``pos`` unless the label says it."""
        with self._lock, sqlite_db.transaction(self.db) as db:
            seconds = label.seconds
            if seconds is None and pos is not None:
                row = db.execute(
                    "SELECT shown_at FROM views WHERE annotator = ? AND pos = ?", (label.annotator, pos)
                ).fetchone()
                seconds = max(0.0, time.time() - row[0]) if row else None
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM labels").fetchone()[0]
            stamp = label.time or now_iso()
            db.execute(
                "INSERT OR REPLACE INTO labels VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    label.set,
                    label.uid,
                    label.annotator,
                    label.choice,
                    shown,
                    json.dumps(list(label.flags)),
                    label.note,
                    stamp,
                    seconds,
                    seq,
                    source,
                ),
            )
        return Label(label.set, label.uid, label.annotator, label.choice, label.flags, label.note, stamp, seconds)

    def undo(self, annotator: str) -> Label | None:
        """Remove the annotator's most recent label (None: they have none); its item is theirs to label again."""
        with self._lock, sqlite_db.transaction(self.db) as db:
            row = db.execute(
                "SELECT set_name, uid, choice, flags, note, time, seconds FROM labels WHERE annotator = ? "
                "ORDER BY seq DESC LIMIT 1",
                (annotator,),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "DELETE FROM labels WHERE set_name = ? AND uid = ? AND annotator = ?", (row[0], row[1], annotator)
            )
        s, u, choice, flags, note, stamp, seconds = row
        return Label(s, u, annotator, choice, tuple(json.loads(flags)), note, stamp, seconds)

    def labels(self) -> list[Label]:
        """Every label, in the order they were given."""
        with self._lock:
            rows = self.db.execute(
                "SELECT set_name, uid, annotator, choice, flags, note, time, seconds, source FROM labels ORDER BY seq"
            ).fetchall()
        return [
            Label(s, u, a, c, tuple(json.loads(f)), n, t, sec, {"source": src} if src != "page" else {})
            for s, u, a, c, f, n, t, sec, src in rows
        ]


__all__ = ["Assignment", "ReviewStore", "now_iso"]
