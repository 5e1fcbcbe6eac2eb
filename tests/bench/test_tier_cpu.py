"""The tier CPU bench (``bench/tier_cpu.py``): on records whose answer is known its figures add up, and two runs
print side by side with their ratio."""

from __future__ import annotations

import json
import sys

import pytest
from bench_helpers import load_bench


@pytest.fixture(scope="module")
def tier_cpu():
    return load_bench("tier_cpu")


def _record(cpu: float, tests: dict[str, tuple[float, float]]) -> dict:
    """A run of two workers and pytest-xdist's controller: ``tests`` by node id, (self, children) CPU seconds."""
    workers = [
        {
            "worker": f"gw{k}",
            "collected_items": 3,
            "before_tests": 10.0,
            "total": 10.0 + sum(s + c for s, c in tests.values()) / 2 + 0.5,
            "total_self": 0.0,
            "tests": [
                {"test": name, "self": s, "children": c, "wall": 1.0}
                for n, (name, (s, c)) in enumerate(tests.items())
                if n % 2 == k
            ],
        }
        for k in (0, 1)
    ]
    controller = {
        "worker": "main",
        "collected_items": 0,
        "before_tests": 0,
        "total": cpu,
        "total_self": 2.0,
        "tests": [],
    }
    return {"cpu": cpu, "processes": [*workers, controller]}


BEFORE = {"tests/a.py::one": (4.0, 0.0), "tests/a.py::two": (1.0, 1.0), "tests/b.py::three": (2.0, 0.0)}
AFTER = {"tests/a.py::one": (1.0, 0.0), "tests/a.py::two": (1.0, 1.0), "tests/b.py::three": (2.0, 0.0)}


def test_the_figures_add_up(tier_cpu):
    figures = tier_cpu.summary(_record(40.0, BEFORE))
    assert figures["cpu, tests' own (all workers)"] == 8.0 and figures["tests run"] == 3
    assert figures["controller (its own CPU)"] == 2.0
    assert figures["gw0: start-up and collection"] == 10.0 and figures["gw0: tests"] + figures["gw1: tests"] == 8.0
    assert tier_cpu.per_file(_record(40.0, BEFORE)) == {"tests/a.py": 6.0, "tests/b.py": 2.0}


def test_two_runs_side_by_side(tier_cpu, tmp_path, capsys):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(_record(40.0, BEFORE)))
    after.write_text(json.dumps(_record(30.0, AFTER)))
    ratios = tier_cpu.main(["compare", str(before), str(after), "--top", "2"])
    assert ratios == {"cpu_whole_run_ratio": 0.75, "cpu_tests_ratio": 0.625}
    out = capsys.readouterr().out
    assert "   4.00    1.00  tests/a.py::one" in out  # the test that moved most comes first
    assert json.loads(out.strip().splitlines()[-1]) == ratios


_TWO_TESTS = """
import sys
import types

import pytest


@pytest.mark.torch
def test_marked():
    sys.modules["rmb_fake_torch"] = types.ModuleType("rmb_fake_torch")


def test_unmarked():
    sys.modules["rmb_fake_transformers"] = types.ModuleType("rmb_fake_transformers")
"""


def test_the_torch_check_fails_on_a_test_that_imports_torch_unmarked(tier_cpu, tmp_path, monkeypatch):
    """Stand-ins for torch and transformers, so that the check runs in this process whatever it imported before."""
    fakes = ("rmb_fake_torch", "rmb_fake_transformers")
    monkeypatch.setattr(tier_cpu, "TORCH_MODULES", fakes)
    monkeypatch.setenv(tier_cpu.CHECK_ENV, "1")
    monkeypatch.delenv(tier_cpu.OUT_ENV, raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # no xdist, hypothesis, ... in the inner run
    module = "test_one_unmarked"  # a name not imported before in this process
    (tmp_path / f"{module}.py").write_text(_TWO_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    torch: as the project's\n")
    # no:unraisableexception: its gc.collect() calls at the inner run's end took 1 s in a worker holding torch
    try:
        code = pytest.main(
            [
                str(tmp_path),
                "-c",
                str(tmp_path / "pytest.ini"),
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:unraisableexception",
            ],
            plugins=[tier_cpu],
        )
    finally:
        for name in (*fakes, module):
            sys.modules.pop(name, None)
    assert code == pytest.ExitCode.TESTS_FAILED  # both tests passed: the check failed the run
    assert tier_cpu._imported_first == {
        "rmb_fake_torch": f"{module}.py::test_marked",
        "rmb_fake_transformers": f"{module}.py::test_unmarked",
    }
    assert tier_cpu._unmarked == [f"{module}.py::test_unmarked: rmb_fake_transformers"]  # the marked one passes


@pytest.mark.parametrize("args", [["-n", "2"], ["-n2"], ["--numprocesses=2"], ["--dist", "worksteal"]])
def test_the_torch_check_refuses_workers_whose_failures_it_would_not_see(tier_cpu, args):
    """In xdist's workers the check's failure never reached the run's exit status: it passed where it should fail."""
    with pytest.raises(SystemExit, match="runs in one process"):
        tier_cpu.torch_check([*args, "tests/core"])
