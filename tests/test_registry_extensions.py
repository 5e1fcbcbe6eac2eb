"""Every extension point on the one registry (core/registry.py): each module registers itself under
its name, and a lookup imports only what it needs."""

import json
import subprocess
import sys

from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, available_kinds
from rmb_build.evaluate.families import FAMILIES, families


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
