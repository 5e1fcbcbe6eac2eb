"""Adding a benchmark format is one module (``tests/helpers/toy_format.py``) and its test: once the module
is imported, detection, ``rmb evaluate --format`` and the default protocol know it, and a release of it
is evaluated end to end."""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from formats_helpers import write_jsonl

from rmb_build.benchmarks import BENCHMARK_FORMATS
from rmb_build.benchmarks.formats import detect_format, format_names
from rmb_build.benchmarks.tables import local_rows
from rmb_build.cli import main
from rmb_build.evaluate.protocols import default_for


@pytest.fixture
def toy():
    """The toy format's module, imported (so registered) for this test only."""
    sys.modules.pop("toy_format", None)
    module = importlib.import_module("toy_format")
    yield module
    BENCHMARK_FORMATS.remove(module.FORMAT)
    sys.modules.pop("toy_format", None)


ROWS = [
    {"question": "Why is the sky blue?", "good": "Rayleigh scattering of sunlight", "bad": "paint", "topic": "science"},
    {"question": "2 + 2?", "good": "4", "bad": "five, give or take", "topic": "math"},
    {"question": "Say hi.", "good": "Hello there, friend!", "bad": "hi", "topic": "chat"},
]


def test_a_format_module_is_detected_from_its_fields(tmp_path, toy):
    assert detect_format(local_rows(write_jsonl(tmp_path / "toy.jsonl", ROWS))) == "toybench"
    assert "toybench" in format_names()
    assert default_for("toybench") == toy.PROTOCOL == "rewardbench"


def test_a_format_module_is_listed_by_evaluate_format(tmp_path, toy, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", "--release", "x", "--format", "nope", "--rm", "baseline:length", "--out", str(tmp_path)])
    known = "unknown format 'nope' (known: rmb, judgebench, rewardbench, rewardbench2, rm-bench, toybench)"
    assert stopped.value.code == 2 and known in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "rm-bench, toybench" in " ".join(capsys.readouterr().out.split())


def test_a_format_module_is_evaluated_end_to_end_under_its_protocol(tmp_path, toy):
    path = write_jsonl(tmp_path / "toy.jsonl", ROWS)
    out = tmp_path / "out"
    args = ["--rm", "baseline:length", "--out", str(out), "--cache", str(tmp_path / "cache"), "--bootstrap", "20"]
    assert main(["evaluate", "--release", str(path), *args, "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["protocol"]["name"] == "rewardbench"  # its entry's, not native
    bench = results["benchmark"]
    # the longer answer wins: science and chat are won, math ("five, give or take" is longer) is lost
    assert bench["format"] == "toybench" and bench["topics"] == {"science": 1.0, "math": 0.0, "chat": 1.0}
    assert bench["headline"] == pytest.approx(2 / 3)
    assert results["pairwise"]["overall"]["n"] == 3


def test_a_format_module_is_forgotten_after_its_test():
    assert "toybench" not in format_names()
