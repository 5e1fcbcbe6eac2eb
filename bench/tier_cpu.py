"""Where a test tier's CPU goes: per test (self and reaped children), per worker's start-up and collection, in all.

CPU, not wall time: on a shared machine wall time measures the other processes; CPU seconds (user + system)
barely move with load. ``run`` runs pytest (by default the quick tier, ``-n 2 -m "not slow"``) with this file
as a plugin: each worker writes, per test, the CPU its process and the children it reaped spent over the test's
setup, call and teardown, and what it spent before its first test (interpreter start, conftest, collection)
and after its last. The run's whole CPU is what this script's reaped children used (pytest's controller, its
workers, their children). ``compare`` prints two runs side by side (totals, then the files and tests that moved
most) with the ratio after/before. A test that imports torch first pays for the import: costs move between
tests with the order, so compare files and totals more than single tests.

Each record also says after which test torch, transformers and sentence-transformers first stood in the process's
``sys.modules`` (``imported_first``). ``torch-check`` runs the unmarked quick tests in one process and fails (exit 1),
naming the test, when one of those appears after a test not marked ``torch`` or during collection: such a test costs
the worker that was meant never to import them (``tests/conftest.py``'s ordering) 5-10 s of CPU. A module is
reported once, by the first test that imports it: mark what it names and run it again.

Run: ``nice -n 10 python bench/tier_cpu.py run --out before.json [-- PYTEST ARGS]`` (one run at a time
per checkout), then ``python bench/tier_cpu.py compare before.json after.json [--top N]``, or
``python bench/tier_cpu.py show run.json [--top N]``; ``nice -n 10 python bench/tier_cpu.py torch-check``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICK_TIER = ["-n", "2", "--dist", "worksteal", "-m", "not slow"]
UNMARKED_QUICK = ["-p", "no:xdist", "-m", "not slow and not torch"]
OUT_ENV = "TIER_CPU_OUT"  # the folder each worker writes its record into
CHECK_ENV = "TIER_CPU_TORCH_CHECK"  # set: the run fails where a watched module came in unmarked
# What the ``torch`` mark is for (pyproject.toml's markers): loading the encoder imports sentence-transformers.
TORCH_MODULES = ("torch", "transformers", "sentence_transformers")
COLLECTION = "(start-up and collection)"


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- the pytest plugin (``-p tier_cpu`` with bench/ on PYTHONPATH), one record per process ---

_tests: list[dict[str, Any]] = []
_marks: dict[str, float] = {}
_imported_first: dict[str, str] = {}  # a watched module -> the test after which it was first in sys.modules
_unmarked: list[str] = []  # "test: module" where the test that brought it in is not marked torch


def _newly_imported(where: str, marked: bool) -> None:
    for name in TORCH_MODULES:
        if name in sys.modules and name not in _imported_first:
            _imported_first[name] = where
            if not marked:
                _unmarked.append(f"{where}: {name}")


def pytest_sessionstart(session: Any) -> None:
    for state in (_tests, _marks, _imported_first, _unmarked):  # one record per session
        state.clear()


def pytest_collection_finish(session: Any) -> None:
    _marks["collected_self"], _marks["collected_children"] = _cpu_self(), _cpu_children()
    _marks["collected_items"] = len(session.items)
    _newly_imported(COLLECTION, marked=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    self0, children0, wall0 = _cpu_self(), _cpu_children(), time.monotonic()
    yield
    _newly_imported(item.nodeid, marked=item.get_closest_marker("torch") is not None)
    _tests.append(
        {
            "test": item.nodeid,
            "self": round(_cpu_self() - self0, 3),
            "children": round(_cpu_children() - children0, 3),
            "wall": round(time.monotonic() - wall0, 3),
        }
    )


def pytest_sessionfinish(session: Any) -> None:
    if os.environ.get(CHECK_ENV) and _unmarked and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    folder = os.environ.get(OUT_ENV)
    if not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    record = {
        "worker": worker,
        "collected_items": _marks.get("collected_items", 0),
        "before_tests": round(_marks.get("collected_self", 0.0) + _marks.get("collected_children", 0.0), 3),
        "total": round(_cpu_self() + _cpu_children(), 3),
        "total_self": round(_cpu_self(), 3),
        "tests": _tests,
        "imported_first": _imported_first,
    }
    Path(folder, f"{worker}.json").write_text(json.dumps(record))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get(CHECK_ENV) and _unmarked:
        terminalreporter.section("imported torch, transformers or sentence-transformers unmarked")
        for line in _unmarked:
            terminalreporter.write_line(f"{line} (mark the test torch: pyproject.toml's markers)")


# --- the script ---


def _pytest_command(pytest_args: list[str], **env_extra: str) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
    return [sys.executable, "-m", "pytest", "-q", "-p", "tier_cpu", "-p", "no:cacheprovider", *pytest_args], env


def run(out: Path, pytest_args: list[str]) -> dict[str, Any]:
    """Run pytest with the plugin; the records of every process, the run's CPU and wall time, in one JSON."""
    with tempfile.TemporaryDirectory(prefix="tier-cpu-") as folder:
        command, env = _pytest_command(pytest_args, **{OUT_ENV: folder})
        children0, wall0 = _cpu_children(), time.monotonic()
        completed = subprocess.run(command, cwd=ROOT, env=env)
        whole = _cpu_children() - children0
        records = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]
    result = {
        "args": pytest_args,
        "returncode": completed.returncode,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "cpu": round(whole, 2),
        "wall": round(time.monotonic() - wall0, 2),
        "load": os.getloadavg(),
        "processes": records,
    }
    out.write_text(json.dumps(result, indent=1))
    return result


def summary(result: dict[str, Any]) -> dict[str, float]:
    """The run's figures: its CPU in all, per worker before, during and after its tests, and the count of tests."""
    figures: dict[str, float] = {"cpu, whole run": result["cpu"]}
    tests = 0
    for record in result["processes"]:
        if (
            record["worker"] == "main" and not record["tests"]
        ):  # pytest-xdist's controller: its workers are its children
            figures["controller (its own CPU)"] = record["total_self"]
            continue
        spent = sum(t["self"] + t["children"] for t in record["tests"])
        name = record["worker"]
        figures[f"{name}: start-up and collection"] = record["before_tests"]
        figures[f"{name}: tests"] = round(spent, 2)
        figures[f"{name}: after its last test"] = round(record["total"] - record["before_tests"] - spent, 2)
        tests += len(record["tests"])
    figures["cpu, tests' own (all workers)"] = round(
        sum(t["self"] + t["children"] for r in result["processes"] for t in r["tests"]), 2
    )
    figures["tests run"] = tests
    return figures


def per_test(result: dict[str, Any]) -> dict[str, float]:
    return {t["test"]: t["self"] + t["children"] for r in result["processes"] for t in r["tests"]}


def per_file(result: dict[str, Any]) -> dict[str, float]:
    files: dict[str, float] = defaultdict(float)
    for test, cpu in per_test(result).items():
        files[test.split("::")[0]] += cpu
    return dict(files)


def _ratio(before: float, after: float) -> str:
    return f"{after / before:.2f}" if before else "-"


def compare(before: dict[str, Any], after: dict[str, Any], top: int) -> dict[str, float]:
    """Print the two runs side by side; return the ratios of the whole run's CPU and of the tests' own."""
    a, b = summary(before), summary(after)
    print(f"{'figure':45s} {'before':>9s} {'after':>9s} {'after/before':>12s}")
    for key in dict.fromkeys([*a, *b]):
        print(f"{key:45s} {a.get(key, 0):9.1f} {b.get(key, 0):9.1f} {_ratio(a.get(key, 0), b.get(key, 0)):>12s}")
    for title, table_a, table_b in (
        ("files", per_file(before), per_file(after)),
        ("tests", per_test(before), per_test(after)),
    ):
        moved = sorted(set(table_a) | set(table_b), key=lambda k: -abs(table_a.get(k, 0) - table_b.get(k, 0)))
        print(f"--- {title} that moved most (CPU s before, after; - = not run)")
        for key in moved[:top]:
            was, now = table_a.get(key), table_b.get(key)
            print(f"{'-' if was is None else f'{was:7.2f}':>7s} {'-' if now is None else f'{now:7.2f}':>7s}  {key}")
    return {
        "cpu_whole_run_ratio": round(b["cpu, whole run"] / a["cpu, whole run"], 3),
        "cpu_tests_ratio": round(b["cpu, tests' own (all workers)"] / a["cpu, tests' own (all workers)"], 3),
    }


def show(result: dict[str, Any], top: int) -> None:
    for key, value in summary(result).items():
        print(f"{key:45s} {value:9.1f}")
    for record in result["processes"]:
        for name, test in record.get("imported_first", {}).items():
            print(f"{record['worker']}: {name} first imported by {test}")
    for title, table in (("files", per_file(result)), ("tests", per_test(result))):
        print(f"--- {title} by CPU s")
        for key, cpu in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            print(f"{cpu:7.2f}  {key}")


def torch_check(pytest_args: list[str]) -> int:
    """Run the tests (by default the unmarked quick ones, in one process) failing where a watched module came in
    unmarked; pytest's exit status."""
    if any(a == "-n" or a.startswith(("-n", "--numprocesses", "--dist")) for a in pytest_args):
        # the imports are seen in the workers, whose exit status pytest's controller does not take
        raise SystemExit("tier_cpu.py torch-check: runs in one process; drop -n/--numprocesses/--dist")
    command, env = _pytest_command(pytest_args, **{CHECK_ENV: "1"})
    return subprocess.run(command, cwd=ROOT, env=env).returncode


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run the tier with the plugin and write its record")
    p_run.add_argument("--out", type=Path, required=True)
    p_run.add_argument("pytest_args", nargs="*", help=f"after --; default: {' '.join(QUICK_TIER)}")
    p_cmp = sub.add_parser("compare", help="two records side by side")
    p_cmp.add_argument("before", type=Path)
    p_cmp.add_argument("after", type=Path)
    p_cmp.add_argument("--top", type=int, default=25)
    p_show = sub.add_parser("show", help="one record")
    p_show.add_argument("record", type=Path)
    p_show.add_argument("--top", type=int, default=40)
    p_check = sub.add_parser("torch-check", help="fail where an unmarked test imports torch, transformers or ST")
    p_check.add_argument("pytest_args", nargs="*", help=f"after --; default: {' '.join(UNMARKED_QUICK)}")
    args = parser.parse_args(argv)
    if args.command == "torch-check":
        sys.exit(torch_check(args.pytest_args or UNMARKED_QUICK))
    if args.command == "run":
        result = run(args.out, args.pytest_args or QUICK_TIER)
        figures = summary(result)
        print(json.dumps(figures))
        return figures
    if args.command == "compare":
        ratios = compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()), args.top)
        print(json.dumps(ratios))
        return ratios
    show(json.loads(args.record.read_text()), args.top)
    return summary(json.loads(args.record.read_text()))


if __name__ == "__main__":
    main()
