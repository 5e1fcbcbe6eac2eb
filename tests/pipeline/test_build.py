"""``pipeline/build.py`` runs every stage from what its spec declares: it imports no stage module and names no
stage (a stage's knowledge is its module's: ``rmb_build/stages/<name>.py``, its spec and hooks). Preflight and the
build config take what they need of a stage from its spec too (its section, its endpoints, its check, its position):
neither imports a stage module, and preflight names no stage."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rmb_build.pipeline import stages

PIPELINE = Path(stages.__file__).parent
BUILD = PIPELINE / "build.py"
STAGE_MODULES = {spec.work.__module__.rsplit(".", 1)[1] for spec in stages.STAGES if spec.work is not None} | {
    spec.name for spec in stages.STAGES if spec.work is None
}


@pytest.mark.parametrize("module", ["build.py", "preflight.py", "config.py"])
def test_imports_no_stage_module(module):
    imported = set()
    for node in ast.walk(ast.parse((PIPELINE / module).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "rmb_build.stages":
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rmb_build.stages."):
            imported.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            imported |= {a.name.split(".")[2] for a in node.names if a.name.startswith("rmb_build.stages.")}
    assert STAGE_MODULES >= {"generate", "judge", "gather", "release"}  # what the check looks for
    assert not imported & STAGE_MODULES


def test_build_names_no_stage():
    """No stage's name as a name in the code or a word in a string (docstrings aside); ``release`` is also the
    artifact's word (the summary's ``release`` path, the log's "release written"), so it is left out."""
    names = ({spec.name for spec in stages.STAGES} | STAGE_MODULES) - {"release"}
    tree = ast.parse(BUILD.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, DOCUMENTED) and ast.get_docstring(n)}
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            named.append((node.lineno, node.id))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            named += [(node.lineno, w) for w in re.findall(r"[a-z_]+", node.value) if w in names]
    assert not named


DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def test_preflight_names_no_stage():
    """No stage's name as a name in the code or as a whole string: what a stage needs checked is its spec's (its
    ``check``, its ``endpoints``). (Words of its messages may be stage names as English: "gather", "sets". The
    build config's sections bear their stages' names: its keys are a contract.)"""
    names = {spec.name for spec in stages.STAGES} | STAGE_MODULES
    named = [
        (node.lineno, node.id if isinstance(node, ast.Name) else node.value)
        for node in ast.walk(ast.parse((PIPELINE / "preflight.py").read_text()))
        if (isinstance(node, ast.Name) and node.id in names) or (isinstance(node, ast.Constant) and node.value in names)
    ]
    assert not named
