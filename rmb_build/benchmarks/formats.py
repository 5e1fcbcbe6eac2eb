"""Open any supported benchmark by path, Hub id or name, detecting its format from its fields.

Formats: ``rmb`` (RMB's folder layout or its Hugging Face form) and the formats registered in
``benchmarks.BENCHMARK_FORMATS``, one module each (``rewardbench``, ``rewardbench2``, ``rm-bench``,
``judgebench``: JSON / JSON Lines / Parquet files, a folder of them, or a Hub id). ``rmb`` as a source
(when no such local folder exists) is the official RMB release, downloaded once (``benchmarks/fetch.py``).

Detection, used unless a format is given, goes by each format's distinctive fields, as its registry entry
(``base.BenchmarkFormat``) declares them, and never guesses (a file none of whose records has any of them
is refused as no benchmark):
1. ``rmb`` when the path is RMB's layout (``Pairwise_set/`` or ``BoN_set/``), or the records carry the
   Hugging Face form's ``conversation`` and ``scenario`` fields; a format whose entry names ``own_fields``
   (``judgebench``: ``pair_id``, ``response_A``, ``response_B``, ``label``) when the first record has all
   of them.
2. Otherwise every record needs ``prompt``, ``chosen`` and ``rejected``; ``chosen`` and ``rejected`` must
   be both strings or both lists, the same in every record: the answer kind.
3. The formats whose entry's ``answers`` is that kind are tried in their ``order``, each asking its
   ``misfit`` of every record: strings are ``rewardbench`` (every record fits); of lists, ``rm-bench``
   fits when every record has exactly three chosen and three rejected strings (RM-Bench's styles) and
   ``rewardbench2`` when every record has one of RewardBench 2's own fields (``num_correct``,
   ``num_incorrect``, ``total_completions``, ``models``). ``subset`` and ``domain`` decide nothing
   (RM-Bench's own files have a ``subset``). When exactly one fits, that is the format; when several
   or none fit, reading stops with one line asking for ``--format``.

Names from the data (subsets such as ``bigcode/humanevalpack``, domains) are kept verbatim as labels
(item_meta, results' ``benchmark`` summaries). Where such a name becomes part of a scenario id, a uid
or a file name it is percent-encoded, ``%`` as ``%25`` and ``/`` as ``%2F`` and nothing else
(``Other/bigcode%2Fhumanevalpack``), so that a scenario id keeps its ``Goal[/Task]/Name`` parts
(``taxonomy.parse_scenario_id``); ``benchmark.decode_label`` reverses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.base import BenchmarkFormat
from rmb_build.benchmarks.tables import Row, hub_rows, local_rows
from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.hub import check_hub_dataset, is_hub_id
from rmb_build.core.walk import ReadAccount
from rmb_build.release.hf import is_hf_folder
from rmb_build.release.load import read_release
from rmb_build.release.read import Release, find_rmb_root, refuse_a_set_folder

RMB = "rmb"
HF_FORM_FIELDS = ("conversation", "scenario")
REQUIRED = ("prompt", "chosen", "rejected")


def format_names() -> tuple[str, ...]:
    """``rmb`` and every registered benchmark format, by name: what ``--format`` takes."""
    return (RMB, *BENCHMARK_FORMATS.names())


def check_format(name: str) -> str:
    """``name`` when it is a format ``format_names`` lists; else RMBError, one line naming them all."""
    if name not in format_names():
        raise RMBError(f"unknown format {name!r} (known: {', '.join(format_names())})")
    return name


def _own_field_formats() -> dict[str, tuple[str, ...]]:
    """The formats found by fields of their own (their entry's ``own_fields``), before the answer kind."""
    return {name: f.own_fields for name, f in BENCHMARK_FORMATS.items() if f.own_fields}


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


def _first_misfit(rows: Sequence[Row], fmt: BenchmarkFormat) -> tuple[Row, str | None, str] | None:
    """The first record that is not of ``fmt`` (a record of its answer kind), with its field and why."""
    if fmt.misfit is None:
        return None
    for row in rows:
        found = fmt.misfit(row)
        if found is not None:
            return row, *found
    return None


def _where(row: Row, other: Row) -> str:
    """``other`` named in ``row``'s error: this record, item N, or item N of FILE."""
    if other is row:
        return "this record"
    return f"item {other.index}{'' if other.file == row.file else ' of ' + other.file}"


def _ask_for_format(
    source: str, kind: str, misfits: dict[BenchmarkFormat, tuple[Row, str | None, str] | None]
) -> InputError:
    """The one-line error of a release of answer kind ``kind`` that several formats fit (no misfit) or none."""
    if not misfits:
        return InputError(source, f"'chosen' and 'rejected' are {kind}s, which no format reads")
    fits = [fmt for fmt, m in misfits.items() if m is None]
    if fits:
        names = f"{'both' if len(fits) == 2 else 'each of'} {' and '.join(f.name for f in fits)}"
        options = " or ".join(f"--format {f.name}" for f in fits)
        return InputError(source, f"fits {names} ({' and '.join(f.fits_as for f in fits)}): pass {options}")
    options = " or ".join(f"--format {f.name}" for f in misfits)
    named = [m for m in misfits.values() if m is not None]
    row, field, why = named[0]
    reasons = [why] + [f"{_where(row, other)}{'' if f is None else f' field {f!r}'} {w}" for other, f, w in named[1:]]
    return row.fail(field, f"{'; '.join(reasons)}: fits no format; pass {options}")


def _refuse_strays(rows: Sequence[Row], own_fields: dict[str, tuple[str, ...]]) -> None:
    """A file none of whose records has a field of any format is no benchmark: refused as such, not
    read as the format whose first field it lacks."""
    known_fields = {*REQUIRED, *HF_FORM_FIELDS, *(k for fields in own_fields.values() for k in fields)}
    files: dict[str, bool] = {}
    for row in rows:
        files[row.file] = files.get(row.file, False) or any(k in row.data for k in known_fields)
    by_answers = [f.title or f.name for _, f in BENCHMARK_FORMATS.items() if f.answers is not None]
    for file, known in files.items():
        if not known:
            raise InputError(
                file,
                f"not a benchmark: no record has prompt, chosen or rejected ({', '.join(by_answers)}), "
                "conversation and scenario (RMB's Hugging Face form) nor "
                + "; ".join(f"{', '.join(f)} ({fmt})" for fmt, f in own_fields.items()),
            )


def detect_format(rows: Sequence[Row], source: str | None = None) -> str:
    """The format of ``rows`` by the rule in this module's docstring; InputError names a file that is
    no benchmark or the first odd record, or asks for ``--format`` when no format or several fit."""
    source = source if source is not None else (rows[0].file if rows else "input")
    if not rows:
        raise InputError(source, "holds no records")
    own_fields = _own_field_formats()
    _refuse_strays(rows, own_fields)
    if all(k in rows[0].data for k in HF_FORM_FIELDS):
        return RMB
    for fmt, fields in own_fields.items():
        if all(k in rows[0].data for k in fields):
            return fmt
    kind = _answer_kind(rows)
    tried = sorted((f for _, f in BENCHMARK_FORMATS.items() if f.answers == kind), key=lambda f: (f.order, f.name))
    misfits = {fmt: _first_misfit(rows, fmt) for fmt in tried}
    fits = [fmt for fmt, m in misfits.items() if m is None]
    if len(fits) == 1:
        return fits[0].name
    raise _ask_for_format(source, kind, misfits)


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
    if fmt is not None:
        check_format(fmt)
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


__all__ = ["RMB", "check_format", "detect_format", "format_names", "open_release"]
