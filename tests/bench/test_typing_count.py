"""The bare-``Any`` count (``bench/typing_count.py``): on a source whose answer is known it counts exactly the
annotations that are ``Any`` alone; on the package it prints the figure issue 51 bounds."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from bench_helpers import load_bench

ROOT = Path(__file__).resolve().parents[2]

SOURCE = """
from typing import Any
import typing

x: Any = 1                                   # 1
y: dict[str, Any] = {}                       # not bare
z: "Any"                                     # 2


def f(a: Any, /, b: Any | None, *args: Any, c: typing.Any, **kw: Any) -> Any:   # 3 4 5 6 7
    inner: list[Any] = []                    # not bare
    return a


class C:
    field: Any                               # 8
    other: int

    async def g(self, v: "typing.Any") -> "dict[str, Any]":   # 9
        ...

lam = lambda q: q
"""


@pytest.fixture(scope="module")
def counter():
    return load_bench("typing_count")


def test_the_count_is_exact_on_a_source_of_known_answer(counter, tmp_path, capsys):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "mod.py").write_text(textwrap.dedent(SOURCE))
    (package / "clean.py").write_text("def h(n: int) -> int:\n    return n\n")

    assert counter.count_file(package / "sub" / "mod.py") == (9, 14)
    summary = counter.main([str(package)])
    assert summary == {"bare_any": 9, "files": 2, "annotations": 16}
    out = capsys.readouterr().out
    assert "9  pkg/sub/mod.py" in out and "clean.py" not in out.split("total")[0]
    assert json.loads(out.strip().splitlines()[-1]) == summary


ALIASES = """
from typing import Annotated, Any as Anything, TypeAlias
import typing as t

JSON = Anything
Raw: TypeAlias = JSON
Later = Deeper
Deeper = t.Any
Text = str


def f(a: Anything, b: JSON, c: "Raw", d: t.Any, e: Annotated[Any, "why"], g: Later) -> Text:  # 1-6
    return str(a)


def h(a: list[JSON], b: JSON | None, c: Annotated[int, "n"]) -> dict[str, Raw]:  # none bare
    return {}
"""


def test_another_name_for_any_counts_as_any(counter, tmp_path):
    # an alias of Any, made here or imported under another name, is Any: renaming it does not lower the count
    path = tmp_path / "aliases.py"
    path.write_text(textwrap.dedent(ALIASES))
    assert counter.count_file(path) == (6, 12)


def test_the_package_count_prints(counter, capsys):
    summary = counter.main([str(ROOT / "rmb_build"), "--top", "5"])
    with capsys.disabled():
        print(f"\nbare Any in rmb_build/: {summary['bare_any']} of {summary['annotations']} annotations")
    assert summary["files"] > 100 and 0 <= summary["bare_any"] <= summary["annotations"]
    assert summary["bare_any"] <= 60, "issue 51 bounds the bare Any in rmb_build/ at 60"
