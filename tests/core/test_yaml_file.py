"""One reader of YAML (``core.yaml_file``): what cannot be read or is not YAML is one line naming the file and the
line; the build config, the downstream config, a suite file, the known-models table and the taxonomy all read
through it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import rmb_build
from rmb_build.core.errors import InputError
from rmb_build.core.yaml_file import parse_yaml, read_yaml

DEEP = sys.getrecursionlimit()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"name: demo\nstages: [gather\n", r": line 3: invalid YAML: "),
        (b"a: 1\n  b: 2\n", r": line 2: invalid YAML: "),
        (b"name: d\xe9mo\n", r": invalid UTF-8 at byte 7"),
        # what safe_load raises besides YAMLError: a date that cannot be, a value its explicit tag refuses
        (b"name: x\nsince: 2024-02-30\n", r": line 2: invalid YAML: "),
        (b"a: 2001-13-45\n", r": line 1: invalid YAML: "),
        (b"a: 1\nb: !!int abc\n", r": line 2: invalid YAML: "),
        (b"a: !!float x\n", r": line 1: invalid YAML: "),
        (b'a: 1\nb: "x\x07"\n', r": line 2: invalid YAML: "),  # a control character: the reader's error
        # as many levels as frames allowed (each level takes at least one): deeper only costs time (2000 took 1.4 s)
        (b"a: " + b"[" * DEEP + b"]" * DEEP + b"\n", ": invalid YAML: nested too deeply"),
    ],
)
def test_a_file_that_is_not_yaml_is_one_line_naming_it_and_the_line(tmp_path, content, said):
    path = tmp_path / "build.yaml"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_yaml(path)
    assert str(err.value).startswith(f"{path}{said}") and "\n" not in str(err.value), str(err.value)


def test_a_missing_file_and_yaml_text_read_as_data(tmp_path):
    with pytest.raises(InputError, match=r"nope\.yaml: no such file$"):
        read_yaml(tmp_path / "nope.yaml")
    assert parse_yaml("a: [1, 2]\n", "here") == {"a": [1, 2]}


def test_a_suite_file_that_is_not_yaml_names_its_line(tmp_path):
    from rmb_build.evaluate.suite import read_suite

    path = tmp_path / "suite.yaml"
    path.write_text("benchmarks:\n  - {release: a\n")
    with pytest.raises(InputError, match=r"suite\.yaml: line \d+: invalid YAML: "):
        read_suite(str(path))


def test_an_evaluate_suite_that_yaml_cannot_construct_is_one_line_and_exit_2(tmp_path, capsys):
    from rmb_build.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text("benchmarks:\n  - release: a\n    since: 2024-02-30\n")
    assert main(["evaluate", "--suite", str(path), "--rm", "baseline:length", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}: line 3: invalid YAML: " in err, err


def test_only_the_reader_parses_yaml():
    package = Path(rmb_build.__file__).parent
    parsing = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("safe_load", "load", "full_load", "unsafe_load"):
                if isinstance(node.value, ast.Name) and node.value.id == "yaml":
                    parsing.append(path.relative_to(package).as_posix())
    assert parsing == ["core/yaml_file.py"]
