"""The one registry mechanism: discovery by package, one-line errors, duplicate names refused."""

import sys
import textwrap

import pytest

from rmb_build.core.errors import RMBError
from rmb_build.core.registry import Registry


def _package(tmp_path, monkeypatch, name, modules):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        f"from rmb_build.core.registry import Registry\nREG = Registry('toy kind', {name!r})\n"
    )
    for mod, body in modules.items():
        (pkg / f"{mod}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, key)
    return __import__(name).REG


def test_discovers_each_module_once_and_skips_private(tmp_path, monkeypatch):
    reg = _package(
        tmp_path,
        monkeypatch,
        "toyreg_a",
        {
            "beta": "from toyreg_a import REG\nREG.add('beta', 2)\n",
            "alpha": "from toyreg_a import REG\n@REG.register('alpha')\ndef f():\n    return 1\n",
            "_helper": "raise RuntimeError('a helper is not an extension')\n",
        },
    )
    assert reg.module_names() == ["alpha", "beta"]
    assert reg.names() == ["alpha", "beta"]
    assert reg.get("beta") == 2 and reg.get("alpha")() == 1
    assert "alpha" in reg and len(reg) == 2


def test_unknown_name_is_one_line_naming_field_and_known(tmp_path, monkeypatch):
    reg = _package(tmp_path, monkeypatch, "toyreg_b", {"only": "from toyreg_b import REG\nREG.add('only', 1)\n"})
    with pytest.raises(RMBError) as err:
        reg.get("nope", field="--thing")
    assert str(err.value) == "--thing 'nope': unknown toy kind (known: only)"


def test_load_imports_one_module_only(tmp_path, monkeypatch):
    reg = _package(
        tmp_path,
        monkeypatch,
        "toyreg_c",
        {
            "light": "from toyreg_c import REG\nREG.add('light', 1)\n",
            "heavy": "raise RuntimeError('must not be imported')\n",
        },
    )
    reg.load("light")
    assert reg._entries == {"light": 1}


def test_duplicate_name_refused():
    reg: Registry[int] = Registry("toy kind")
    reg.add("x", 1)
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("x", 2)
    assert reg.names() == ["x"]


def test_order_is_by_name_whatever_was_imported_first(tmp_path, monkeypatch):
    reg = _package(
        tmp_path,
        monkeypatch,
        "toyreg_d",
        {m: f"from toyreg_d import REG\nREG.add({m!r}, 0)\n" for m in ("alpha", "beta", "gamma")},
    )
    reg.load("gamma")  # e.g. an RM kind's module imported by another module before any listing
    assert reg.names() == ["alpha", "beta", "gamma"]
    with pytest.raises(RMBError, match=r"\(known: alpha, beta, gamma\)"):
        reg.get("nope")


def test_a_module_listing_the_entries_while_discovery_imports_it_sees_them_all(tmp_path, monkeypatch):
    reg = _package(
        tmp_path,
        monkeypatch,
        "toyreg_e",
        {
            "alpha": "from toyreg_e import REG\nREG.add('alpha', 0)\n",
            "lister": "from toyreg_e import REG\nNAMES = REG.names()\n",
            "zeta": "from toyreg_e import REG\nREG.add('zeta', 0)\n",
        },
    )
    assert reg.names() == ["alpha", "zeta"]
    assert sys.modules["toyreg_e.lister"].NAMES == ["alpha", "zeta"]
