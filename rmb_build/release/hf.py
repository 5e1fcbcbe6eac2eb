"""The Hugging Face form of a release: configurations ``pairwise`` and ``bon`` (and ``style`` where the release
has ``Style_set/``: ``STYLE_COLUMNS``, a record a row), split ``test``, Parquet
files plus a ``README.md`` card whose YAML header names them, and back.

Columns: ``uid, goal, task, scenario, conversation`` (a list of ``{role, content, language}``), then
``chosen, chosen_model, rejected, rejected_model`` or ``best, best_model, losers, loser_models``,
then ``category_path`` (RMB's field, kept so that the form converts back without loss) and, where
``annotations.jsonl`` has them, judge scores (every annotation key containing ``score``).
``task`` is the task id (``Helpfulness/Chat``) and ``scenario`` the scenario id; ``task`` is empty
for harmlessness. Rows keep the release's order, file by file.
"""

from __future__ import annotations

import json
import numbers
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn, TypeAlias

from rmb_build.core import atomic
from rmb_build.core.errors import InputError
from rmb_build.core.items import Item, PairwiseItem
from rmb_build.core.paths import check_relative_id
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, is_known, parse_scenario_id
from rmb_build.release.read import ANNOTATIONS_FILE, MANIFEST_FILE, Release
from rmb_build.release.rmb_format import load_json_object, parse_item, turns_json
from rmb_build.release.style_set import STYLE_SET, StyleRecord, parse_record, record_from_row, style_row

SPLIT = "test"
CONFIGS = (PAIRWISE_SET, BON_SET)  # configuration name == set name
CARD_FILE = "README.md"
COMMON_COLUMNS = ("uid", "goal", "task", "scenario", "conversation")
SET_COLUMNS = {
    PAIRWISE_SET: ("chosen", "chosen_model", "rejected", "rejected_model"),
    BON_SET: ("best", "best_model", "losers", "loser_models"),
}
EXTRA_COLUMNS = ("category_path",)
# The third configuration, where the release has Style_set/ (release/style_set.py): one row per record.
STYLE_COLUMNS = ("uid", "goal", "task", "scenario", "prompt", "conversation", "chosen", "rejected")


def data_file(config: str) -> str:
    """Where a configuration's Parquet file lives, named as ``push_to_hub`` names a single shard."""
    return f"{config}/{SPLIT}-00000-of-00001.parquet"


def data_files_pattern(config: str) -> str:
    """The ``configs: data_files: path`` glob of the card."""
    return f"{config}/{SPLIT}-*"


def _features(set_name: str, scores: dict[str, int]):
    from datasets import Features, List, Value

    string = Value("string")
    cols: dict[str, Any] = {
        "uid": string,
        "goal": string,
        "task": string,
        "scenario": string,
        "conversation": List({"role": string, "content": string, "language": string}),
    }
    if set_name == PAIRWISE_SET:
        cols.update(chosen=string, chosen_model=string, rejected=string, rejected_model=string)
    else:
        cols.update(best=string, best_model=string, losers=List(string), loser_models=List(string))
    cols["category_path"] = string
    for name, depth in scores.items():
        feature: Value | List = Value("float64")
        for _ in range(depth):
            feature = List(feature)
        cols[name] = feature
    return Features(cols)


def _row(item: Item) -> dict[str, Any]:
    sc = parse_scenario_id(item.scenario_id)
    row: dict[str, Any] = {
        "uid": item.uid,
        "goal": sc.goal,
        "task": sc.task_id or "",
        "scenario": item.scenario_id,
        "conversation": [{"role": t.role, "content": t.content, "language": t.language} for t in item.conversation],
    }
    if isinstance(item, PairwiseItem):
        row.update(
            chosen=item.chosen.answer,
            chosen_model=item.chosen.llm_name,
            rejected=item.rejected.answer,
            rejected_model=item.rejected.llm_name,
        )
    else:
        row.update(
            best=item.best.answer,
            best_model=item.best.llm_name,
            losers=[a.answer for a in item.losers],
            loser_models=[a.llm_name for a in item.losers],
        )
    row["category_path"] = item.category_path
    return row


# An annotation's score: a number, a null, or nested lists of them.
Score: TypeAlias = "float | None | list[Score]"


def _score(value: object, fail: Callable[[str], NoReturn]) -> tuple[Score, int | None]:
    """A score as float, or nested lists of floats (nulls kept), with its nesting depth (None: an
    empty list, whose depth the other lines decide)."""
    if value is None:
        return None, None
    if isinstance(value, list):
        parts = [_score(v, fail) for v in value]
        depths = {d for _, d in parts if d is not None}
        if len(depths) > 1:
            fail("mixes numbers and lists inside one list")
        return [v for v, _ in parts], (depths.pop() + 1 if depths else None)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(f"expected a number or a list of numbers, got {type(value).__name__}")
    return float(value), 0


def judge_scores(
    annotations: Iterable[dict], where: str = ANNOTATIONS_FILE
) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, dict[str, int]]]:
    """Score columns from annotation lines keyed by (set, uid): ``({set: {uid: {key: value}}},
    {set: {key: nesting depth}})``. Every key containing ``score`` is a score column (numbers, or
    lists of them such as ``loser_scores`` and ``loser_score_samples``)."""
    values: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    depths: dict[str, dict[str, int | None]] = defaultdict(dict)
    for n, line in enumerate(annotations, 1):
        set_name, uid = line.get("set"), line.get("uid")
        if set_name not in CONFIGS or uid is None:
            raise InputError(where, f"an annotation needs 'set' ({' or '.join(CONFIGS)}) and 'uid'", line=n)
        for key, raw in line.items():
            if "score" not in key:
                continue
            if key in COMMON_COLUMNS + SET_COLUMNS[set_name] + EXTRA_COLUMNS:
                raise InputError(where, f"score key {key!r} clashes with a column of the Hugging Face form", line=n)

            def fail(msg: str, key: str = key, n: int = n) -> NoReturn:
                raise InputError(where, msg, line=n, field=key)

            value, depth = _score(raw, fail)
            known = depths[set_name].get(key)
            if depth is not None and known is not None and depth != known:
                fail("nests numbers differently from earlier lines")
            if known is None:
                depths[set_name][key] = depth
            values[set_name].setdefault(str(uid), {})[key] = value
    final: dict[str, dict[str, int]] = {}
    for set_name, keys in depths.items():
        rows = values[set_name].values()
        # a key seen only as null is a number column; seen only as empty lists, a list column
        final[set_name] = {
            k: d if d is not None else int(any(isinstance(r.get(k), list) for r in rows)) for k, d in keys.items()
        }
    return dict(values), final


def release_to_dataset_dict(release: Release, annotations: Iterable[dict] | None = None) -> dict[str, Any]:
    """``{config: DatasetDict({"test": Dataset})}`` for each set of the release that has items.

    ``annotations`` defaults to the release's ``annotations.jsonl``; their score keys become columns.
    """
    from datasets import Dataset, DatasetDict

    where = str(release.root / ANNOTATIONS_FILE) if release.root is not None else ANNOTATIONS_FILE
    scores, depths = judge_scores(release.annotations() if annotations is None else annotations, where)
    out = {}
    for config in CONFIGS:
        items = list(release.items(config))
        if not items:
            continue
        set_scores = scores.get(config, {})
        columns = depths.get(config, {})
        rows = []
        for item in items:
            row = _row(item)
            got = set_scores.get(item.uid, {})
            row.update({k: got.get(k) for k in columns})
            rows.append(row)
        features = _features(config, columns)
        out[config] = DatasetDict({SPLIT: Dataset.from_list(rows, features=features)})
    if release.style:
        out[STYLE_SET] = DatasetDict(
            {SPLIT: Dataset.from_list([style_row(r) for r in release.style], features=_style_features())}
        )
    return out


def _style_features():
    from datasets import Features, List, Value

    string = Value("string")
    turn = {"role": string, "content": string, "language": string}
    cols = {c: string for c in STYLE_COLUMNS}
    return Features(
        {
            **cols,
            "conversation": List(turn),
            "chosen": List(string),
            "rejected": List(string),
            "set": string,  # "bon": a BoN item's winner and loser_list[loser] (release/style_set.py)
            "loser": Value("int64"),
        }
    )


def write_hf_release(
    release: Release, out_dir: str | os.PathLike, card: str, annotations: Iterable[dict] | None = None
) -> list[Path]:
    """Write the Hugging Face form under ``out_dir``: Parquet per configuration, ``README.md`` (``card``),
    and ``manifest.json`` when the release has one; exactly what ``push_release`` uploads."""
    out = Path(out_dir)
    dicts = release_to_dataset_dict(release, annotations)
    # a previous write's shards would otherwise linger beside (and be mistaken for) this one's
    for config in (*CONFIGS, STYLE_SET):
        for old in (out / config).glob(f"{SPLIT}-*.parquet"):
            old.unlink()
    if release.manifest is None and (out / MANIFEST_FILE).exists():
        (out / MANIFEST_FILE).unlink()
    written = []
    for config, dd in dicts.items():
        path = out / data_file(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        dd[SPLIT].to_parquet(str(tmp))
        os.replace(tmp, path)
        written.append(path)
    atomic.write_text(out / CARD_FILE, card)
    written.append(out / CARD_FILE)
    if release.manifest is not None:
        atomic.write_json(out / MANIFEST_FILE, release.manifest)
        written.append(out / MANIFEST_FILE)
    return written


def push_release(
    release: Release, repo_id: str, card: str, *, private: bool = False, annotations: Iterable[dict] | None = None
) -> str:
    """Push the Hugging Face form to the Hub with ``push_to_hub`` (one call per configuration), then the
    card and manifest. The token comes from ``HF_TOKEN`` or the Hugging Face login; it is never written
    or logged. Returns the dataset's URL."""
    from huggingface_hub import HfApi

    from rmb_build.core.hub import check_can_push

    check_can_push()
    dicts = release_to_dataset_dict(release, annotations)
    for config, dd in dicts.items():
        dd.push_to_hub(
            repo_id,
            config_name=config,
            private=private,
            commit_message=f"Upload {config} configuration of {release.name}",
        )
    api = HfApi()
    api.upload_file(
        path_or_fileobj=card.encode("utf-8"),
        path_in_repo=CARD_FILE,
        repo_id=repo_id,
        repo_type="dataset",
        commit_message="Dataset card",
    )
    if release.manifest is not None:
        api.upload_file(
            path_or_fileobj=(json.dumps(release.manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
            path_in_repo=MANIFEST_FILE,
            repo_id=repo_id,
            repo_type="dataset",
            commit_message="Release manifest",
        )
    return f"https://huggingface.co/datasets/{repo_id}"


# ---------------------------------------------------------------------------------------------
# Reading the form back


def is_hf_folder(path: Path) -> bool:
    """Whether a local folder is the Hugging Face form (Parquet files under ``pairwise/`` or ``bon/``)."""
    return path.is_dir() and any(any((path / c).glob("*.parquet")) for c in CONFIGS)


def _configs(source: str) -> list[str]:
    from datasets import get_dataset_config_names

    try:
        names = get_dataset_config_names(source)
    except Exception as exc:  # datasets raises many types (FileNotFoundError, DatasetNotFoundError, ...)
        raise InputError(source, f"not a readable Hugging Face dataset: {type(exc).__name__}: {exc}") from None
    configs = [c for c in CONFIGS if c in names]
    if not configs:
        raise InputError(
            source, f"no '{PAIRWISE_SET}' or '{BON_SET}' configuration (found: {', '.join(names) or 'none'})"
        )
    return configs


def _load_split(source: str, config: str):
    from datasets import load_dataset

    if Path(source).is_dir():
        # datasets keys a local folder's cache on its base name and config, not its path or contents:
        # two folders named alike would share (and serve each other's) rows. Read through a private cache.
        with tempfile.TemporaryDirectory(prefix="rmb-hf-cache-") as cache:
            return load_dataset(source, config, split=SPLIT, cache_dir=cache, keep_in_memory=True)
    return load_dataset(source, config, split=SPLIT)


def _raw_item(set_name: str, row: dict[str, Any], where: str, index: int) -> dict[str, Any]:
    """A row as RMB's JSON item, so that rmb_format validates it exactly as it validates a set file."""

    def answer(text_col: str, model_col: str) -> dict[str, Any]:
        return {"llm_name": row[model_col], "answer": row[text_col]}

    turns = turns_json(row["conversation"])
    if set_name == PAIRWISE_SET:
        return {
            "pair_uid": row["uid"],
            "conversation_input": turns,
            "chosen": answer("chosen", "chosen_model"),
            "reject": answer("rejected", "rejected_model"),
            "category_path": row.get("category_path") or "",
        }
    losers, models = row["losers"] or [], row["loser_models"] or []
    if len(losers) != len(models):
        raise InputError(
            where, f"{len(losers)} losers but {len(models)} loser_models", item=index, field="loser_models"
        )
    return {
        "conversation_input": turns,
        "bon_best": answer("best", "best_model"),
        "loser_list": [{"llm_name": m, "answer": a} for a, m in zip(losers, models)],
        "bon_uid": row["uid"],
        "category_path": row.get("category_path") or "",
    }


def _read_style(source: str, strict: bool) -> list[StyleRecord]:
    """The ``style`` configuration's records, checked as a Style_set file's; [] where there is none."""
    from datasets import get_dataset_config_names

    if STYLE_SET not in get_dataset_config_names(source):
        return []
    ds = _load_split(source, STYLE_SET)
    where = f"{source} [{STYLE_SET}/{SPLIT}]"
    missing = [c for c in STYLE_COLUMNS if c not in ds.column_names]
    if missing:
        raise InputError(where, f"missing column(s): {', '.join(missing)}")
    out = []
    for index, row in enumerate(ds):
        scenario_id = row["scenario"]
        if not isinstance(scenario_id, str) or not scenario_id:
            raise InputError(where, "expected a scenario id", item=index, field="scenario")
        out.append(parse_record(record_from_row(row), scenario_id, where, index, strict))
    return out


def _load_manifest(source: str) -> dict[str, Any] | None:
    local = Path(source)
    if local.is_dir():
        path = local / MANIFEST_FILE
        if not path.exists():
            return None
        return load_json_object(path)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        downloaded = hf_hub_download(source, MANIFEST_FILE, repo_type="dataset")
    except EntryNotFoundError:
        return None
    return load_json_object(Path(downloaded), f"{source}: {MANIFEST_FILE}")


def read_hf_release(source: str, strict: bool = True) -> Release:
    """Read the Hugging Face form (a local folder or a Hub id) back into a Release.

    Rows are validated exactly like RMB's set files (``strict`` as in ``read_rmb_release``); the
    ``scenario`` column gives each item's file, ``category_path`` is kept when the column exists.
    """
    name = Path(source).name if Path(source).is_dir() else source.replace("/", "__")
    release = Release(name=name, root=None, source_format="hf")
    for config in _configs(source):
        ds = _load_split(source, config)
        where = f"{source} [{config}/{SPLIT}]"
        missing = [c for c in COMMON_COLUMNS + SET_COLUMNS[config] if c not in ds.column_names]
        if missing:
            raise InputError(where, f"missing column(s): {', '.join(missing)}")
        for index, row in enumerate(ds):
            scenario_id = row["scenario"]
            if not isinstance(scenario_id, str):
                raise InputError(where, "expected a scenario id", item=index, field="scenario")
            try:
                check_relative_id(scenario_id)
            except ValueError as exc:
                raise InputError(where, str(exc), item=index, field="scenario") from None
            if strict and not is_known(scenario_id):
                raise InputError(
                    where,
                    f"unknown scenario {scenario_id!r}: not one of RMB's 49 (run 'rmb audit' to inspect the release)",
                    item=index,
                    field="scenario",
                )
            raw = _raw_item(config, row, where, index)
            item = parse_item(config, raw, scenario_id, where, index, strict)
            release.add(item)
    release.style = _read_style(source, strict)
    release.manifest = _load_manifest(source)
    if not release.files:
        raise InputError(source, "the release holds no items")
    return release


__all__ = [
    "CONFIGS",
    "SPLIT",
    "data_file",
    "data_files_pattern",
    "is_hf_folder",
    "judge_scores",
    "push_release",
    "read_hf_release",
    "release_to_dataset_dict",
    "write_hf_release",
]
