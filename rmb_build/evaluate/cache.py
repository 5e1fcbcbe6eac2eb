"""The persistent score cache: SQLite, one row per (RM fingerprint, text key).

Rows are committed batch by batch while scoring runs, so an interrupted run resumes where it
stopped. Values are JSON (a float for a text score, a dict of votes for a judged pair); Python's
JSON writes floats with repr, so a cached score reads back bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from rmb_build.core import sqlite_db
from rmb_build.core.redact import redact, redact_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (fp TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                                   PRIMARY KEY (fp, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS models (fp TEXT PRIMARY KEY, spec TEXT NOT NULL, describe TEXT NOT NULL);
"""
DEFAULT_CACHE_HELP = "$XDG_CACHE_HOME/rmb/score_cache, or ~/.cache/rmb/score_cache"
DAMAGED_HINT = (
    "delete it (with its -wal and -shm files) to start an empty cache, whose scores are computed again, "
    "or give another cache folder"
)


def default_cache_dir() -> Path:
    """The user's cache folder for scores: ``$XDG_CACHE_HOME/rmb/score_cache`` or ``~/.cache/rmb/score_cache``."""
    from rmb_build.core.paths import user_cache_dir

    return user_cache_dir() / "score_cache"


class ScoreCache:
    """``get_many``/``put_many`` for one folder's ``scores.sqlite``; usable as a context manager."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "scores.sqlite"
        self.db = sqlite_db.connect(self.path, SCHEMA, DAMAGED_HINT)

    def register(self, fp: str, spec: str, describe: Mapping[str, Any]) -> None:
        """Remember which RM a fingerprint stands for (for people inspecting the cache), redacted: an
        adapter's ``describe`` may hold what its target held."""
        with sqlite_db.transaction(self.db):
            self.db.execute(
                "INSERT OR REPLACE INTO models VALUES (?, ?, ?)",
                (fp, redact(spec), json.dumps(redact_json(dict(describe)), sort_keys=True, ensure_ascii=False)),
            )

    def get_many(self, fp: str, keys: Iterable[str]) -> dict[str, Any]:
        sql = "SELECT key, value FROM scores WHERE fp = ? AND key IN ({marks})"
        return {key: json.loads(value) for key, value in sqlite_db.select_in(self.db, sql, list(keys), (fp,))}

    def put_many(self, fp: str, values: Mapping[str, Any]) -> None:
        """Store and commit: what is written here survives an interrupted run."""
        with sqlite_db.transaction(self.db):
            self.db.executemany(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?)",
                [(fp, k, json.dumps(v, allow_nan=False)) for k, v in values.items()],
            )

    def count(self, fp: str) -> int:
        return self.db.execute("SELECT COUNT(*) FROM scores WHERE fp = ?", (fp,)).fetchone()[0]

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "ScoreCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
