"""An ``rmb evaluate`` output as a Hugging Face dataset (``rmb push-results``), and back.

The form: ``results.json`` as evaluate wrote it (redacted), ``predictions/test-00000-of-00001.parquet``
(one row per item: ``set, uid, scenario, outcome``, ``scores`` (the answers' scores, chosen or best
first; null where they are not plain numbers, as a pair judge's votes) and ``prediction``, the line of
predictions.jsonl as JSON, so that the form converts back without loss) and a ``README.md`` card whose
YAML ``configs:`` name the Parquet files, so that ``datasets.load_dataset(DIR)`` loads them.

``open_evaluation`` reads any form (an evaluate folder, this form as a folder, or a Hub id) as an
evaluate folder, so that the leaderboard and ``compare`` read them all alike.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rmb_build.core import atomic
from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.hub import is_hub_id
from rmb_build.core.intervals import FEW_MARK, FEW_NOTE, few_items
from rmb_build.core.redact import redact, redact_json
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.evaluate.compare import check_prediction, read_predictions, release_id
from rmb_build.evaluate.results_check import check_figures

RESULTS_FILE = "results.json"
PREDICTIONS_FILE = "predictions.jsonl"
CARD_FILE = "README.md"
CONFIG = "predictions"
SPLIT = "test"
DATA_FILE = f"{CONFIG}/{SPLIT}-00000-of-00001.parquet"
ENTRIES = {CARD_FILE, RESULTS_FILE, CONFIG}  # what the form holds
SCORE_KEYS = {PAIRWISE_SET: ("chosen", "rejected"), BON_SET: ("best", "losers")}


@dataclass
class Evaluation:
    """An evaluation as an evaluate folder (``folder``: results.json, predictions.jsonl when it has them);
    ``where``: what the user named, for messages; ``scratch`` keeps a converted form's folder alive."""

    folder: Path
    where: str
    scratch: tempfile.TemporaryDirectory[str] | None = None

    @property
    def results_file(self) -> str:
        return str(self.folder / RESULTS_FILE) if self.scratch is None else f"{self.where} [{RESULTS_FILE}]"


# --- an evaluate folder, checked ------------------------------------------------------------------------------


def read_results(path: Path, where: str | None = None) -> dict[str, Any]:
    """A results.json of ``rmb evaluate`` (rm, pairwise, bon), redacted; InputError naming file and field,
    also of a figure of the wrong type or range (``results_check``)."""
    from rmb_build.release.rmb_format import load_json_file

    where = where or str(path)
    results = load_json_file(path, where)
    if not isinstance(results, dict):
        raise InputError(where, "expected a JSON object")
    for key in ("rm", PAIRWISE_SET, BON_SET):
        if key not in results:
            raise InputError(where, "missing", field=key)
    if not isinstance(results["rm"], str) or not results["rm"]:
        raise InputError(where, "expected a non-empty string", field="rm")
    check_figures(results, where)  # every figure a page, card or plot reads: its type and range
    return redact_json(results)


def check_counts(results: dict[str, Any], rows: Sequence[dict], where: str) -> None:
    """Refuse predictions that are not the items results.json counted (set by set)."""
    for set_name in (PAIRWISE_SET, BON_SET):
        overall = (results.get(set_name) or {}).get("overall") or {}
        got = sum(1 for r in rows if r["set"] == set_name)
        if overall.get("n", got) != got:
            raise InputError(
                where,
                f"{got} {set_name} predictions, but results.json counts {overall['n']} items: not one evaluation",
                field="set",
            )


def read_evaluation(folder: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(results, prediction rows) of an ``rmb evaluate --out`` folder, both redacted; refused unless
    results.json records the release's sha256 and predictions.jsonl holds its items."""
    folder = Path(folder)
    path = folder / RESULTS_FILE
    if not path.is_file():
        raise InputError(str(path), "missing: not an 'rmb evaluate' output folder")
    results = read_results(path)
    if release_id(results).sha256 is None:
        raise InputError(
            str(path),
            "records no release sha256 (written before 'rmb evaluate' recorded it), so nobody could tell "
            "which release it scored; re-run 'rmb evaluate'",
            field="release_info",
        )
    rows = [redact_json(r) for r in read_predictions(folder)]
    check_counts(results, rows, str(folder / PREDICTIONS_FILE))
    return results, rows


# --- the form --------------------------------------------------------------------------------------------------


def _scores(row: dict[str, Any]) -> list[float | None] | None:
    """The answers' scores, chosen/best first; None unless every one is a number or null."""
    first, rest = SCORE_KEYS.get(row["set"], (None, None))
    got = row.get("scores")
    if first is None or not isinstance(got, dict):
        return None
    later = got.get(rest)
    values = [got.get(first), *(later if isinstance(later, list) else [later])]
    ok = all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values)
    return [None if v is None else float(v) for v in values] if ok else None


def _table(rows: Sequence[dict[str, Any]]):
    import pyarrow as pa

    schema = pa.schema(
        [
            ("set", pa.string()),
            ("uid", pa.string()),
            ("scenario", pa.string()),
            ("outcome", pa.float64()),
            ("scores", pa.list_(pa.float64())),
            ("prediction", pa.string()),
        ]
    )
    return pa.Table.from_pylist(
        [
            {
                "set": r["set"],
                "uid": str(r["uid"]),
                "scenario": r["scenario"],
                "outcome": float(r["outcome"]),
                "scores": _scores(r),
                "prediction": json.dumps(r, ensure_ascii=False),
            }
            for r in rows
        ],
        schema=schema,
    )


def _pct(x: object) -> str:
    return f"{100 * x:.1f}" if isinstance(x, (int, float)) else "–"


def render_card(results: dict[str, Any], repo_id: str) -> str:
    """The dataset card: YAML header with ``configs``, the headline figures, the release, the files."""
    import yaml

    rid = release_id(results)
    rm = results["rm"].replace("`", "'")
    overall = results.get("rmb_overall") or {}
    protocol = (results.get("protocol") or {}).get("name")
    header = {
        "tags": ["rmb", "reward-model", "evaluation"],
        "pretty_name": f"{results['rm']} on {rid.name}",
        "configs": [
            {"config_name": CONFIG, "data_files": [{"split": SPLIT, "path": f"{CONFIG}/{SPLIT}-*"}], "default": True}
        ],
    }
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# Evaluation of `{rm}`",
        "",
        f"Scored by `rmb evaluate` on the release **{rid.name}** (sha256 `{rid.sha256}`), ties "
        f"`{results.get('ties', 'strict')}`" + (f", protocol `{protocol}`" if protocol else "") + ".",
        "Results of another release (another sha256) are not comparable item by item.",
        "",
        "| figure | accuracy (%) | 95% interval | items |",
        "| --- | --- | --- | --- |",
    ]
    ci, n = overall.get("ci95") or {}, overall.get("n") or {}
    small = overall.get("few_item_scenarios") or {}
    marked = False
    for cell, value in [*(overall.get("cells") or {}).items(), ("rmb_overall", overall.get("mean"))]:
        key = "mean" if cell == "rmb_overall" else cell
        lo_hi = ci.get(key)
        interval = f"[{_pct(lo_hi[0])}, {_pct(lo_hi[1])}]" if isinstance(lo_hi, list) and len(lo_hi) == 2 else "–"
        items = n.get(key, "–")
        if isinstance(items, int) and few_items(items):
            items, marked = f"{items} {FEW_MARK}", True
        if small.get(key) and interval != "–":
            interval, marked = f"{interval} {FEW_MARK}", True
        lines.append(f"| {cell} | {_pct(value)} | {interval} | {items} |")
    if marked:
        lines += [
            "",
            f"{FEW_NOTE}.",
        ]
    lines += [
        "",
        "## Files",
        "",
        f"- `{RESULTS_FILE}`: every figure, as `rmb evaluate` wrote it.",
        f"- `{DATA_FILE}` (configuration `{CONFIG}`, split `{SPLIT}`): one row per item: `set`, `uid`, "
        "`scenario`, `outcome` (1 right, 0 wrong, 0.5 a tie under `half`), `scores` (the answers' scores, "
        "chosen or best first; null for a pair judge) and `prediction` (the item's line of predictions.jsonl).",
        "",
        "```python",
        "from datasets import load_dataset",
        f'items = load_dataset("{repo_id}", "{CONFIG}", split="{SPLIT}")',
        "```",
        "",
        f"Rank it beside other evaluations of the same release: `rmb leaderboard {repo_id} OTHER ... --out site`.",
        "",
    ]
    return redact("\n".join(lines))


def write_form(results: dict[str, Any], rows: Sequence[dict[str, Any]], out: str | Path, repo_id: str) -> list[Path]:
    """Write the form into the (fresh) folder ``out``; returns the files written."""
    import pyarrow.parquet as pq

    out = Path(out)
    data = out / DATA_FILE
    data.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(_table(rows), data)
    atomic.write_json(out / RESULTS_FILE, results)
    atomic.write_text(out / CARD_FILE, render_card(results, repo_id))
    return [out / RESULTS_FILE, data, out / CARD_FILE]


# --- pushing ---------------------------------------------------------------------------------------------------


def push_form(folder: str | Path, repo_id: str, *, private: bool = False) -> str:
    """Upload the form in ``folder`` as one commit (earlier prediction shards replaced); returns the URL.
    The token comes from ``HF_TOKEN`` or the login and is never written or printed."""
    from huggingface_hub import HfApi

    from rmb_build.core.hub import check_can_push

    check_can_push()
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            repo_type="dataset",
            delete_patterns=[f"{CONFIG}/*"],
            commit_message="rmb push-results",
        )
    except Exception as exc:  # HTTP and connection errors of several libraries: one line, redacted
        first = (str(exc).strip().splitlines() or [""])[0]
        raise RMBError(f"cannot push to {repo_id}: {type(exc).__name__}: {redact(first)}") from None
    return f"https://huggingface.co/datasets/{repo_id}"


# --- reading any form back -------------------------------------------------------------------------------------


def _form_rows(folder: Path, where: str) -> list[dict[str, Any]]:
    """The prediction rows of the form's Parquet files, each checked against its typed columns."""
    import pyarrow.parquet as pq

    files = sorted((folder / CONFIG).glob(f"{SPLIT}-*.parquet"))
    if not files:
        raise InputError(f"{where} [{CONFIG}/]", "no Parquet files: not a pushed 'rmb evaluate' result")
    rows = []
    for file in files:
        name = f"{where} [{file.relative_to(folder)}]"
        try:
            table = pq.read_table(file)
        except Exception as exc:  # pyarrow's errors for a damaged or foreign file
            raise InputError(name, f"not a readable Parquet file: {type(exc).__name__}: {exc}") from None
        missing = [c for c in ("set", "uid", "scenario", "outcome", "prediction") if c not in table.column_names]
        if missing:
            raise InputError(name, f"missing column(s): {', '.join(missing)}")
        for i, rec in enumerate(table.to_pylist()):
            try:
                row = json.loads(rec["prediction"])
            except (TypeError, ValueError):
                raise InputError(name, "expected the prediction as JSON", item=i, field="prediction") from None
            if not isinstance(row, dict):
                raise InputError(name, "expected a JSON object", item=i, field="prediction")
            check_prediction(row, name, item=i)
            for col in ("set", "uid", "scenario", "outcome"):
                if rec[col] != (str(row[col]) if col == "uid" else row[col]):
                    raise InputError(name, f"{rec[col]!r} but the prediction says {row[col]!r}", item=i, field=col)
            rows.append(row)
    return rows


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(
            snapshot_download(repo_id, repo_type="dataset", allow_patterns=[RESULTS_FILE, f"{CONFIG}/*.parquet"])
        )
    except Exception as exc:  # offline, not found, gated, no network: one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InputError(
            repo_id, f"no such folder, and the Hub dataset cannot be read: {type(exc).__name__}: {redact(first)}"
        ) from None


def open_evaluation(source: str | Path) -> Evaluation:
    """An evaluate folder as is; a pushed form (a folder, or a Hub id ORG/NAME that is no folder here)
    converted into a private evaluate folder (results.json, predictions.jsonl), checked as it goes."""
    where = str(source)
    local = Path(source)
    if not local.exists() and is_hub_id(where):
        local = _download(where)
    elif not (local / CONFIG).is_dir() or (local / PREDICTIONS_FILE).exists():
        return Evaluation(local, where)
    results_path = local / RESULTS_FILE
    if not results_path.is_file():
        raise InputError(f"{where} [{RESULTS_FILE}]", "missing: not a pushed 'rmb evaluate' result")
    results = read_results(results_path, f"{where} [{RESULTS_FILE}]")
    rows = _form_rows(local, where)
    check_counts(results, rows, f"{where} [{CONFIG}]")
    scratch = tempfile.TemporaryDirectory(prefix="rmb-results-")
    folder = Path(scratch.name)
    atomic.write_json(folder / RESULTS_FILE, results)
    atomic.write_jsonl(folder / PREDICTIONS_FILE, rows)
    return Evaluation(folder, where, scratch)


__all__ = [
    "Evaluation",
    "open_evaluation",
    "push_form",
    "read_evaluation",
    "render_card",
    "write_form",
]
