"""The on-disk response cache: SQLite in WAL mode, safe for several processes at once.

A key is the sha256 of the canonical JSON of what changes an answer (see ``request_key``); a row
holds the response as received plus what ``rmb cache stats|prune`` needs (when, which endpoint,
model and stage). Every ``put`` is committed before it returns, so a run killed at any moment
keeps every response it has received.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from rmb_build.core import sqlite_db
from rmb_build.llm.types import ChatRequest

DB_NAME = "responses.sqlite"
DAMAGED_HINT = (
    "delete it (with its -wal and -shm files) to start an empty cache: its responses are asked again "
    "(and paid again on a paid endpoint)"
)
KEY_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    response TEXT NOT NULL,
    endpoint TEXT NOT NULL,      -- endpoint_identity: base URL without credentials, or embedded:<model>
    endpoint_name TEXT NOT NULL, -- the name in the build config that asked
    model TEXT NOT NULL,
    stage TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at);
"""


def request_key(
    req: ChatRequest,
    endpoint_id: str,
    structured_mode: str | None = None,
    messages: Iterable[tuple[str, str]] | None = None,
) -> str:
    """sha256 of everything that changes the answer, and nothing else (no key, timeout, stage, tag).

    ``messages`` overrides the request's own (a re-ask conversation is its own request).
    """
    payload = {
        "v": KEY_VERSION,
        "endpoint": endpoint_id,
        "model": req.model,
        "messages": [list(m) for m in (req.messages if messages is None else messages)],
        "temperature": req.temperature,
        "top_p": req.top_p,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "schema": req.response_schema,
        "structured": structured_mode if req.response_schema is not None else None,
        "top_logprobs": req.top_logprobs,
        "sample_index": req.sample_index,
    }
    if req.stop:  # only when set, so the keys of requests without one stay as they were
        payload["stop"] = list(req.stop)
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


class ResponseCache:
    """SQLite response store at ``path`` (a folder gets ``responses.sqlite`` inside it; ``:memory:``
    an empty store that lives as long as the object)."""

    def __init__(self, path: str | Path, *, create: bool = True):
        in_memory = str(path) == ":memory:"
        path = Path(path)
        if not in_memory:
            if path.suffix != ".sqlite":
                path = path / DB_NAME
            if not create and not path.is_file():
                raise FileNotFoundError(path)
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite_db.connect(path, _SCHEMA, DAMAGED_HINT)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The cached responses among ``keys`` (missing keys are absent from the result)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            for key, resp in sqlite_db.select_in(
                self._db, "SELECT key, response FROM responses WHERE key IN ({marks})", keys
            ):
                out[key] = json.loads(resp)
        return out

    def put(
        self, key: str, response: dict[str, Any], *, endpoint: str, endpoint_name: str = "", model: str, stage: str = ""
    ) -> None:
        """Store and commit one response."""
        row = (key, json.dumps(response, ensure_ascii=False), endpoint, endpoint_name, model, stage, time.time())
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", row)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        """Rows, size on disk, counts per endpoint / model / stage, oldest and newest entry."""
        with self._lock:
            rows, oldest, newest = self._db.execute(
                "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM responses"
            ).fetchone()
            groups = {
                col: dict(
                    self._db.execute(f"SELECT {col}, COUNT(*) FROM responses GROUP BY {col} ORDER BY COUNT(*) DESC")
                )
                for col in ("endpoint", "endpoint_name", "model", "stage")
            }
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return {
            "path": str(self.path),
            "rows": rows,
            "size_bytes": size,
            "oldest": _iso(oldest),
            "newest": _iso(newest),
            "by_endpoint": groups["endpoint"],
            "by_endpoint_name": groups["endpoint_name"],
            "by_model": groups["model"],
            "by_stage": groups["stage"],
        }

    def prune(
        self,
        *,
        older_than_days: float | None = None,
        endpoint: str | None = None,
        model: str | None = None,
        stage: str | None = None,
        vacuum: bool = True,
    ) -> int:
        """Delete the rows matching every given filter (endpoint matches identity or name); returns how many."""
        where: list[str] = []
        args: list[object] = []
        if older_than_days is not None:
            where.append("created_at < ?")
            args.append(time.time() - older_than_days * 86400)
        if endpoint is not None:
            where.append("(endpoint = ? OR endpoint_name = ?)")
            args += [endpoint, endpoint]
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if stage is not None:
            where.append("stage = ?")
            args.append(stage)
        sql = "DELETE FROM responses" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock:
            deleted = self._db.execute(sql, args).rowcount
            if vacuum and deleted:
                self._db.execute("VACUUM")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
