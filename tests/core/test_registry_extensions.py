"""Every extension point on the one registry (core/registry.py): each module registers itself under
its name, and a lookup imports only what it needs."""

import json
import subprocess
import sys
from typing import Literal

import pytest

from rmb_build.benchmarks import BENCHMARK_FORMATS, judgebench, rewardbench, rewardbench2, rmbench
from rmb_build.benchmarks.base import BenchmarkFormat
from rmb_build.benchmarks.formats import format_names
from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, available_kinds
from rmb_build.evaluate.families import FAMILIES, families
from rmb_build.llm.embedded_models import EMBEDDED, EmbeddedModel
from rmb_build.stages.sources import SOURCES, Source, SourceOptions, option_classes, source


def _imported_after(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; the rmb_build modules (and torch) it imported."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith(('rmb_build', 'torch')))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_each_adapter_module_registers_its_own_kind():
    kinds = available_kinds()
    assert ADAPTERS.names() == kinds
    for kind, cls in ADAPTERS.items():
        assert issubclass(cls, RewardModel) and cls.kind == kind


def test_an_rm_spec_imports_its_adapter_only():
    mods = _imported_after("from rmb_build.evaluate.adapters import load_rm\nload_rm('baseline:length')")
    adapters = {m for m in mods if m.startswith("rmb_build.evaluate.adapters.")}
    assert adapters == {"rmb_build.evaluate.adapters.baseline"}
    assert "torch" not in mods


def test_each_family_module_registers_one_family_under_its_name():
    modules = FAMILIES.module_names()
    assert [name.replace("-", "_") for name in FAMILIES.names()] == modules
    assert all(fam.name == name for name, fam in FAMILIES.items())
    assert list(families()) == sorted(FAMILIES.names())


def test_source_kinds_are_registered_with_their_options_by_kind():
    assert SOURCES.names() == ["csv", "hf", "json", "jsonl", "parquet", "rmb_release", "sharegpt"]
    assert option_classes() == tuple(SOURCES.get(k).options for k in SOURCES.names())
    assert all(cls.kind == kind for kind, cls in SOURCES.items())


def test_source_registration_keeps_its_checks():
    class ToyOptions(SourceOptions):
        kind: Literal["toy"] = "toy"

    class Toy(Source):
        options = ToyOptions

    with pytest.raises(ValueError, match=r"Toy.options must declare kind: Literal\['other'\]"):
        source("other")(Toy)
    with pytest.raises(ValueError, match="source kind 'csv' registered twice"):
        source("csv")(type("Csv2", (Source,), {"options": SOURCES.get("csv").options}))
    assert "toy" not in SOURCES and "other" not in SOURCES


def test_each_format_module_registers_its_build_and_summary():
    assert format_names() == ("rmb", "judgebench", "rewardbench", "rewardbench2", "rm-bench")
    assert BENCHMARK_FORMATS.names() == list(format_names()[1:])
    for module in (judgebench, rewardbench, rewardbench2, rmbench):
        entry = BENCHMARK_FORMATS.get(module.FORMAT)
        assert (entry.name, entry.build, entry.summary) == (module.FORMAT, module.build, module.summary)


def test_each_format_names_a_known_protocol_and_a_way_to_be_detected():
    from rmb_build.evaluate.protocols import PROTOCOLS, default_for

    assert {name: default_for(name) for name in format_names()} == {
        "rmb": "rmb",
        "judgebench": "judgebench",
        "rewardbench": "rewardbench-run_rm",
        "rewardbench2": "rewardbench-v2",
        "rm-bench": "rm-bench",
    }
    assert default_for("label-studio") == default_for(None) == "native"
    for name, entry in BENCHMARK_FORMATS.items():
        assert entry.protocol in PROTOCOLS, name
        assert bool(entry.own_fields) != (entry.answers is not None), name  # each is detected, one way
    with pytest.raises(ValueError, match="not both"):
        BenchmarkFormat("both", rewardbench.build, rewardbench.summary, own_fields=("x",), answers="string")


def test_embedded_models_are_one_registry_in_the_order_added():
    assert EMBEDDED.names() == ["smollm2", "gemma3"]
    assert all(isinstance(m, EmbeddedModel) and m.name == name for name, m in EMBEDDED.items())
    with pytest.raises(RMBError, match=r"^embedded 'nope': unknown embedded model \(known: smollm2, gemma3\)$"):
        EMBEDDED.get("nope", field="embedded")
