"""Helpers of the benchmark-format tests: a scorer whose scores the test writes into the answers, and
writers for the formats' files.

An answer ``"3.5|some text"`` scores 3.5 under ``python:<this file>:score``.
"""

from __future__ import annotations

import json
from pathlib import Path

from rmb_build.cli import main

SCORER = f"python:{Path(__file__).resolve()}:score"


def score(conversation, answer):
    return float(answer.split("|", 1)[0])


def ans(value: float, label: str) -> str:
    """An answer text that ``score`` scores ``value``."""
    return f"{value}|{label}"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_json(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def evaluate(tmp_path: Path, release: Path | str, *extra: str, out: str = "out") -> dict:
    """``rmb evaluate`` with the test scorer; returns results.json (the command must succeed)."""
    code = main(
        [
            "evaluate",
            "--release",
            str(release),
            "--rm",
            SCORER,
            "--out",
            str(tmp_path / out),
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
            "--bootstrap",
            "20",
            *extra,
        ]
    )
    assert code == 0
    return json.loads((tmp_path / out / "results.json").read_text(encoding="utf-8"))


def evaluate_error(tmp_path: Path, release: Path | str, capsys, *extra: str) -> str:
    """``rmb evaluate`` that must fail as a user error: exit 2, one line on stderr, no results; returns the line."""
    capsys.readouterr()
    code = main(
        [
            "evaluate",
            "--release",
            str(release),
            "--rm",
            SCORER,
            "--out",
            str(tmp_path / "bad-out"),
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
            "--bootstrap",
            "20",
            *extra,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert not (tmp_path / "bad-out" / "results.json").exists()
    return err.strip()
