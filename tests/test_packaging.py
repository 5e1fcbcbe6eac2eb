"""The wheel ships every package: pyproject's explicit package list (needed for the prompts/
mapping) names each folder with an ``__init__.py``, so a non-editable install finds every module."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {name: ROOT / folder for name, folder in tool["package-dir"].items()}
    found = set()
    for name, folder in mapped.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            dotted = ".".join([name, *rel.parts])
            # a folder mapped elsewhere (rmb_build.pipeline) is counted under its own name
            if not any(init.parent == other and other_name != dotted for other_name, other in mapped.items()):
                found.add(dotted)
    assert found == set(tool["packages"]), (
        sorted(found - set(tool["packages"])),
        sorted(set(tool["packages"]) - found),
    )
