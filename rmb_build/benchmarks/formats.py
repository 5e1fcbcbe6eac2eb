"""Open any supported benchmark by path, Hub id or name, detecting its format from its fields.

Formats: ``rmb`` (RMB's folder layout or its Hugging Face form), ``rewardbench``, ``rewardbench2``,
``rm-bench`` and ``judgebench`` (JSON / JSON Lines / Parquet files, a folder of them, or a Hub id). ``rmb`` as a source
(when no such local folder exists) is the official RMB release, downloaded once (``release/fetch.py``).

Detection, used unless a format is given, goes by each format's distinctive fields and never guesses
(a file none of whose records has any of them is refused as no benchmark):
1. ``rmb`` when the path is RMB's layout (``Pairwise_set/`` or ``BoN_set/``), or the records carry the
   Hugging Face form's ``conversation`` and ``scenario`` fields; a format whose registry entry names
   ``own_fields`` (``judgebench``: ``pair_id``, ``response_A``, ``response_B``, ``label``) when the first
   record has all of them.
2. Otherwise every record needs ``prompt``, ``chosen`` and ``rejected``; ``chosen`` and ``rejected`` must
   be both strings or both lists, the same in every record.
3. Strings: ``rewardbench``.
4. Lists: ``rewardbench2`` fits when every record has one of RewardBench 2's own fields
   (``num_correct``, ``num_incorrect``, ``total_completions``, ``models``); ``rm-bench`` fits when every
   record has exactly three chosen and three rejected strings (RM-Bench's styles). ``subset`` and
   ``domain`` decide nothing (RM-Bench's own files have a ``subset``). When exactly one fits, that is
   the format; when both or neither fit, reading stops with one line asking for ``--format``.

Names from the data (subsets such as ``bigcode/humanevalpack``, domains) are kept verbatim as labels
(item_meta, results' ``benchmark`` summaries). Where such a name becomes part of a scenario id, a uid
or a file name it is percent-encoded, ``%`` as ``%25`` and ``/`` as ``%2F`` and nothing else
(``Other/bigcode%2Fhumanevalpack``), so that a scenario id keeps its ``Goal[/Task]/Name`` parts
(``taxonomy.parse_scenario_id``); ``benchmark.decode_label`` reverses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from rmb_build.benchmarks import BENCHMARK_FORMATS, judgebench, rewardbench, rewardbench2, rmbench  # noqa: F401
from rmb_build.benchmarks.tables import Row, hub_rows, local_rows
from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.hub import check_hub_dataset, is_hub_id
from rmb_build.core.walk import ReadAccount
from rmb_build.release.hf import is_hf_folder
from rmb_build.release.load import read_release
from rmb_build.release.read import Release, find_rmb_root, refuse_a_set_folder

RMB = "rmb"
FORMATS = (RMB, *BENCHMARK_FORMATS.names())  # the registered formats' modules import here
HF_FORM_FIELDS = ("conversation", "scenario")
REQUIRED = ("prompt", "chosen", "rejected")

# The formats found by fields of their own (their registry entry's ``own_fields``), before the rule below.
OWN_FIELD_FORMATS = {name: f.own_fields for name, f in BENCHMARK_FORMATS.items() if f.own_fields}
KNOWN_FIELDS = (*REQUIRED, *HF_FORM_FIELDS, *(k for fields in OWN_FIELD_FORMATS.values() for k in fields))


def _kind(row: Row, key: str) -> str:
    value = row.data[key]
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    raise row.fail(key, f"expected a string or a list of strings, got {type(value).__name__}")


def _answer_kind(rows: Sequence[Row]) -> str:
    """``string`` or ``list``: the one kind of answers of every record; InputError names the first odd record."""
    kind: str | None = None
    for row in rows:
        for key in REQUIRED:
            if key not in row.data:
                raise row.fail(key, f"missing (a benchmark record needs {', '.join(REQUIRED)})")
        chosen, rejected = _kind(row, "chosen"), _kind(row, "rejected")
        if chosen != rejected:
            raise row.fail(
                "rejected", f"is a {rejected} but 'chosen' is a {chosen}: both must be strings or both lists"
            )
        if kind is None:
            kind = chosen
        elif chosen != kind:
            raise row.fail("chosen", f"is a {chosen} but earlier records have a {kind}: one format per release")
    assert kind is not None, "detect_format checks that there are rows"
    return kind


Misfit = tuple[str | None, str]  # why a record does not fit a format: (its field, if one, and the reason)


def _rewardbench2_misfit(row: Row) -> Misfit | None:
    if any(key in row.data for key in rewardbench2.OWN_FIELDS):
        return None
    return None, f"has none of RewardBench 2's fields ({', '.join(rewardbench2.OWN_FIELDS)})"


def _rmbench_misfit(row: Row) -> Misfit | None:
    styles = len(rmbench.STYLES)
    for key in ("chosen", "rejected"):
        n = len(row.data[key])
        if n != styles:
            return key, f"has {n} answer{'' if n == 1 else 's'} where RM-Bench has {styles} (one per style)"
        if not all(isinstance(a, str) for a in row.data[key]):
            return key, "holds an answer that is not a string"
    return None


# The formats whose answers are lists, each with why a record does not fit it (None when it fits).
LIST_FORMATS: dict[str, Callable[[Row], Misfit | None]] = {
    rmbench.FORMAT: _rmbench_misfit,
    rewardbench2.FORMAT: _rewardbench2_misfit,
}


def _first_misfit(rows: Sequence[Row], misfit: Callable[[Row], Misfit | None]) -> tuple[Row, str | None, str] | None:
    for row in rows:
        found = misfit(row)
        if found is not None:
            return row, *found
    return None


def _where(row: Row, other: Row) -> str:
    """``other`` named in ``row``'s error: this record, item N, or item N of FILE."""
    if other is row:
        return "this record"
    return f"item {other.index}{'' if other.file == row.file else ' of ' + other.file}"


def _ask_for_format(source: str, misfits: dict[str, tuple[Row, str | None, str] | None]) -> InputError:
    """The one-line error of a release that fits several list formats (no misfit) or none."""
    options = " or ".join(f"--format {f}" for f in misfits)
    named = [m for m in misfits.values() if m is not None]
    if not named:
        return InputError(
            source,
            f"fits both {' and '.join(misfits)} (RM-Bench's three answers per side and "
            f"RewardBench 2's fields in every record): pass {options}",
        )
    row, field, why = named[0]
    reasons = [why] + [f"{_where(row, other)}{'' if f is None else f' field {f!r}'} {w}" for other, f, w in named[1:]]
    return row.fail(field, f"{'; '.join(reasons)}: fits no format; pass {options}")


def _refuse_strays(rows: Sequence[Row]) -> None:
    """A file none of whose records has a field of any format is no benchmark: refused as such, not
    read as the format whose first field it lacks."""
    files: dict[str, bool] = {}
    for row in rows:
        files[row.file] = files.get(row.file, False) or any(k in row.data for k in KNOWN_FIELDS)
    for file, known in files.items():
        if not known:
            raise InputError(
                file,
                "not a benchmark: no record has prompt, chosen or rejected (RewardBench, RewardBench 2, "
                "RM-Bench), conversation and scenario (RMB's Hugging Face form) nor "
                + "; ".join(f"{', '.join(f)} ({fmt})" for fmt, f in OWN_FIELD_FORMATS.items()),
            )


def detect_format(rows: Sequence[Row], source: str | None = None) -> str:
    """The format of ``rows`` by the rule in this module's docstring; InputError names a file that is
    no benchmark or the first odd record, or asks for ``--format`` when no format or several fit."""
    source = source if source is not None else (rows[0].file if rows else "input")
    if not rows:
        raise InputError(source, "holds no records")
    _refuse_strays(rows)
    if all(k in rows[0].data for k in HF_FORM_FIELDS):
        return RMB
    for fmt, fields in OWN_FIELD_FORMATS.items():
        if all(k in rows[0].data for k in fields):
            return fmt
    if _answer_kind(rows) == "string":
        return rewardbench.FORMAT
    misfits = {fmt: _first_misfit(rows, misfit) for fmt, misfit in LIST_FORMATS.items()}
    fits = [fmt for fmt, m in misfits.items() if m is None]
    if len(fits) == 1:
        return fits[0]
    raise _ask_for_format(source, misfits)


def _name(source: str) -> str:
    path = Path(source)
    return path.resolve().name if path.exists() else source.replace("/", "__")


def open_release(source: str | Path, fmt: str | None = None, strict: bool = True) -> Release:
    """The one way to open a release or benchmark: ``source`` (a path, a Hub id, or ``rmb`` for the official
    release, downloaded once, then read from the user cache) in format ``fmt``, or the detected one. RMB
    releases come back as ``Release``; the others as ``BenchmarkRelease``. ``fmt="rmb"`` (``RMB``) takes
    RMB's own layout only, in its folder or its Hugging Face form (a folder or a Hub id): what every
    command that works on that layout opens (audit, publish, review, contamination, the classifier's
    training release, the build's gold check)."""
    if fmt is not None and fmt not in FORMATS:
        raise RMBError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    source = str(source)
    path = Path(source)
    if source == RMB and not path.exists():
        if fmt not in (None, RMB):
            raise RMBError(f"--release rmb is the official RMB release; it cannot be read as {fmt}")
        from rmb_build.benchmarks.fetch import official_release

        return official_release(strict=strict)
    if path.exists():
        refuse_a_set_folder(path)
    if fmt == RMB or (fmt is None and path.exists() and (find_rmb_root(path) is not None or is_hf_folder(path))):
        return read_release(source, strict=strict)
    account: ReadAccount | None = ReadAccount(source)
    if path.exists():
        rows = local_rows(path, account)
    elif is_hub_id(source):
        check_hub_dataset(source)
        if fmt is None and _hub_has_rmb_configs(source):
            return read_release(source, strict=strict)
        rows = hub_rows(source)
        account = None
    else:
        raise RMBError(f"{source}: no such file or folder (and not a Hugging Face Hub id of the form ORG/NAME)")
    fmt = fmt or detect_format(rows, source)
    if fmt == RMB:
        raise InputError(source, "records of RMB's Hugging Face form: pass the folder holding pairwise/ and bon/")
    release = BENCHMARK_FORMATS.get(fmt).build(rows, _name(source))
    if not release.files:
        raise InputError(source, "holds no records")
    if account is not None:
        account.items = sum(len(items) for items in release.files.values())
        release.account = account
    return release


def _hub_has_rmb_configs(repo_id: str) -> bool:
    """Whether a Hub dataset is RMB's Hugging Face form (configurations ``pairwise`` / ``bon``)."""
    from datasets import get_dataset_config_names

    from rmb_build.release.hf import CONFIGS

    try:
        names = get_dataset_config_names(repo_id)
    except Exception:  # unreachable or unknown: hub_rows reports it in one line
        return False
    return any(c in names for c in CONFIGS)


__all__ = ["FORMATS", "RMB", "detect_format", "open_release"]
