"""A benchmark suite: one reward model over several benchmarks in one run (``rmb evaluate --suite``).

A suite names its benchmarks, each a release (a path, a Hub id, or ``rmb`` for the official RMB release),
with its format (detected when absent) and protocol (the format's authors' when absent). A suite file, YAML
or JSON::

    benchmarks:
      - {name: RMB, release: rmb}
      - {name: RM-Bench, release: data/total_dataset.json, format: rm-bench}
      - {name: JudgeBench, release: data/judgebench/, protocol: judgebench}

A built-in suite (``BUILTIN``) names the field's set; those of its benchmarks that cannot be opened here are
listed as missing, with why, instead of failing the run (a suite file's benchmark that cannot be opened is an
error naming it). Every benchmark's results go in their own folder; ``table`` makes the suite's one row per
benchmark, in the shape of a model card's row: the benchmark's headline as its authors compute it, its 95%
interval where rmb computes one for that figure, and the protocol it was measured under.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.yaml_file import read_yaml


@dataclass(frozen=True)
class SuiteEntry:
    """One benchmark of a suite: its column name, the release, its format and protocol (None: the defaults)."""

    name: str
    release: str
    format: str | None = None
    protocol: str | None = None

    @property
    def folder(self) -> str:
        """The results folder's name under the suite's --out: the name, made safe for a path."""
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.name).strip("-.") or "benchmark"


# The field's model-card row (Skywork-Reward-V2's card: RewardBench, RewardBench 2, RMB, RM-Bench, JudgeBench),
# each from where `rmb evaluate --release` finds it.
BUILTIN: dict[str, tuple[SuiteEntry, ...]] = {
    "field": (
        SuiteEntry("RMB", "rmb", "rmb"),
        SuiteEntry("RewardBench", "allenai/reward-bench", "rewardbench"),
        SuiteEntry("RewardBench 2", "allenai/reward-bench-2", "rewardbench2"),
        SuiteEntry("RM-Bench", "THU-KEG/RM-Bench", "rm-bench"),
        SuiteEntry("JudgeBench", "ScalerLab/JudgeBench", "judgebench"),
    ),
}
FIELDS = ("name", "release", "format", "protocol")


def read_suite(spec: str) -> tuple[tuple[SuiteEntry, ...], bool]:
    """The suite ``spec`` names (a built-in's name or a suite file) and whether it is built in."""
    if spec in BUILTIN:
        return BUILTIN[spec], True
    path = Path(spec)
    if not path.is_file():
        raise RMBError(f"--suite {spec}: neither a built-in suite ({', '.join(BUILTIN)}) nor a suite file")
    return _entries(read_yaml(path), str(path)), False


def _entries(raw: object, where: str) -> tuple[SuiteEntry, ...]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("benchmarks"), list) or not raw["benchmarks"]:
        raise InputError(where, "expected a mapping with a non-empty list 'benchmarks'", field="benchmarks")
    out: list[SuiteEntry] = []
    for i, item in enumerate(raw["benchmarks"]):
        field = f"benchmarks[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(where, "expected a mapping with 'release'", field=field)
        unknown = sorted(set(map(str, item)) - set(FIELDS))
        if unknown:
            raise InputError(where, f"unknown key {unknown[0]!r} (known: {', '.join(FIELDS)})", field=field)
        for key in FIELDS:
            value = item.get(key)
            if (key == "release" and value is None) or (
                value is not None and (not isinstance(value, str) or not value)
            ):
                raise InputError(where, "expected a non-empty string", field=f"{field}.{key}")
        release = Path(item["release"]).expanduser()
        if not release.is_absolute() and (Path(where).parent / release).exists():  # relative to the suite file
            release = Path(where).parent / release
        entry = SuiteEntry(
            item.get("name") or Path(item["release"]).name, str(release), item.get("format"), item.get("protocol")
        )
        if entry.folder.lower() in RESERVED:
            raise InputError(
                where, f"{entry.name!r} names a file of the suite's own: give another 'name'", field=f"{field}.name"
            )
        _check_names(entry, where, field)
        if any(e.folder.lower() == entry.folder.lower() for e in out):
            raise InputError(
                where, f"a second benchmark named {entry.name!r}: give each a distinct 'name'", field=f"{field}.name"
            )
        out.append(entry)
    return tuple(out)


RESERVED = {"suite.json", "suite.md", "suite.html"}  # what --suite writes beside the benchmarks' folders


def _check_names(entry: SuiteEntry, where: str, field: str) -> None:
    """A format or protocol the suite names exists (checked before any benchmark is scored)."""
    from rmb_build.benchmarks.formats import format_names
    from rmb_build.evaluate.protocols import PROTOCOLS

    if entry.format is not None and entry.format not in format_names():
        known = ", ".join(format_names())
        raise InputError(where, f"unknown format {entry.format!r} (known: {known})", field=f"{field}.format")
    if entry.protocol is not None and entry.protocol not in PROTOCOLS:
        raise InputError(
            where, f"unknown protocol {entry.protocol!r} (known: {', '.join(PROTOCOLS)})", field=f"{field}.protocol"
        )


def headline(results: Mapping[str, Any]) -> dict[str, Any]:
    """A benchmark's figure for the suite's row: RMB's overall (the mean of its four cells, with its pooled
    interval) for an RMB release, else the format's own headline, with its interval where the format computes one
    (JudgeBench's overall share); ``reason`` where there is no figure."""
    bench = results.get("benchmark")
    if bench:
        overall = bench.get("overall") if isinstance(bench.get("overall"), Mapping) else {}
        return {
            "figure": f"{bench['format']} headline",
            "value": bench.get("headline"),
            "ci95": overall.get("interval") if bench.get("headline") is not None else None,
            "reason": bench.get("headline_reason"),
        }
    top = results.get("rmb_overall") or {}
    return {
        "figure": "RMB overall",
        "value": top.get("mean"),
        "ci95": (top.get("ci95") or {}).get("mean"),
        "reason": f"the release lacks {', '.join(top['missing'])}: the mean of the cells it has"
        if top.get("missing")
        else None,
    }


def row(entry: SuiteEntry, results: Mapping[str, Any]) -> dict[str, Any]:
    """The suite table's row for one evaluated benchmark."""
    scoring = results.get("scoring") or {}
    return {
        "benchmark": entry.name,
        "release": entry.release,
        "format": (results.get("release_info") or {}).get("format") or "rmb",
        "protocol": (results.get("protocol") or {}).get("name"),
        "ties": results.get("ties"),
        **headline(results),
        "items": sum(((results.get("release_info") or {}).get("items") or {}).values()),
        "scored": scoring.get("scored"),
        "cached": scoring.get("cached"),
        "results": f"{entry.folder}/results.json",
    }


def table(rm: str, rows: Sequence[Mapping[str, Any]], missing: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """suite.json: the RM, one row per benchmark evaluated, and the benchmarks missing here (with why); any
    credentials a release's name or a reason quotes (a URL's user and password, a token) redacted."""
    from rmb_build.core.redact import redact_json

    return redact_json({"rm": rm, "benchmarks": list(rows), "missing": list(missing)})


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def markdown(suite: Mapping[str, Any]) -> str:
    """suite.md: the row as a model card prints it, one column per benchmark, then how each was measured."""
    rows = suite["benchmarks"]
    lines = [f"# {suite['rm']} across {len(rows)} benchmark{'s' * (len(rows) != 1)}", ""]
    if rows:
        lines += [
            "| RM | " + " | ".join(r["benchmark"] for r in rows) + " |",
            "| --- |" + " ---: |" * len(rows),
            f"| {suite['rm']} | " + " | ".join(_pct(r["value"]) for r in rows) + " |",
            "",
            "| benchmark | figure | value | 95% interval | protocol | ties | items | texts scored (cached) | results |",
            "| --- | --- | ---: | --- | --- | --- | ---: | ---: | --- |",
        ]
        for r in rows:
            ci = r["ci95"]
            interval = f"{_pct(ci[0])}-{_pct(ci[1])}" if ci else "none computed for this figure"
            value = _pct(r["value"]) if r["value"] is not None else f"none ({r['reason']})"
            figure = r["figure"] + (f" ({r['reason']})" if r["value"] is not None and r["reason"] else "")
            lines.append(
                f"| {r['benchmark']} | {figure} | {value} | {interval} | {r['protocol']} | {r['ties']} | "
                f"{r['items']} | {r['scored']} ({r['cached']}) | [{r['results']}]({r['results']}) |"
            )
    if suite["missing"]:
        lines += ["", "Missing here (not evaluated):", ""]
        lines += [f"- {m['benchmark']} (`{m['release']}`): {m['reason']}" for m in suite["missing"]]
    return "\n".join(lines) + "\n"


def dumps(suite: Mapping[str, Any]) -> str:
    return json.dumps(suite, indent=2, ensure_ascii=False) + "\n"


__all__ = ["BUILTIN", "SuiteEntry", "dumps", "headline", "markdown", "read_suite", "row", "table"]
