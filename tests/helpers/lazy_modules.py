"""A library a test module needs, imported at its first use rather than when the module is collected: both
pytest-xdist workers collect every test module, and only the worker that runs the ``torch`` tests should pay for
importing torch (about 2 s of CPU) and transformers (``tests/conftest.py``'s ordering)."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

import pytest


class _OnUse:
    """Stands for the module ``name``: reading a public attribute imports it (once; later reads find it imported).
    Private names are refused without importing: pytest's collection reads ``__test__`` and its fixture markers on
    every name a test module holds."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attr)


def on_use(name: str) -> Any:
    """The module ``name``, imported by the first test that reads one of its attributes."""
    return _OnUse(name)


def importorskip_on_use(name: str, reason: str | None = None) -> Any:
    """As ``pytest.importorskip(name, reason=reason)`` at a test module's top (the module skipped, with the reason,
    where ``name`` is not installed), but ``name`` is imported by the first test that reads one of its attributes."""
    __tracebackhide__ = True  # the skip's line in the summary is the test module's, as importorskip's is
    try:
        found = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent package is missing
        found = None
    if found is None:
        pytest.skip(reason or f"could not import {name!r}: not installed", allow_module_level=True)
    return on_use(name)
