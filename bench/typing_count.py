"""How many annotations under ``rmb_build/`` are exactly ``Any``: the count issue 51 bounds (at most 60).

By the AST, an annotation counts when it is the name ``Any`` alone (``Any``, ``typing.Any``, or the string
``"Any"``): a parameter's (``*args`` and ``**kwargs`` too), a return's, or an annotated assignment's (class
fields included). ``dict[str, Any]`` or ``Any | None`` do not count: they say what holds the unknown. Another
name for ``Any`` counts as ``Any``: ``from typing import Any as A``, ``import typing as t`` (``t.Any``), an
alias made in the module (``JSON = Any``, ``JSON: TypeAlias = Any``, ``type JSON = Any``, or of such an alias),
and ``Annotated[Any, ...]``; an alias imported from another module is not followed.

Run: ``python bench/typing_count.py [ROOT] [--top N]``; prints the top files, then one JSON line
(``{"bare_any": total, "files": n, "annotations": n}``).
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Collection

PACKAGE = Path(__file__).resolve().parents[1] / "rmb_build"


TYPING_MODULES = ("typing", "typing_extensions")
# what can bind a name to a type: ``type X = ...`` (ast.TypeAlias) is Python 3.12's
ALIAS_NODES = (ast.Assign, ast.AnnAssign, *((ast.TypeAlias,) if hasattr(ast, "TypeAlias") else ()))


def any_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound to ``Any`` in ``tree``, names bound to the typing module), aliases of aliases included."""
    names, modules = {"Any"}, set(TYPING_MODULES)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in TYPING_MODULES:
            names.update(a.asname or a.name for a in node.names if a.name == "Any")
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name in TYPING_MODULES)
    aliases = [n for n in ast.walk(tree) if isinstance(n, ALIAS_NODES)]
    grown = True
    while grown:  # an alias of an alias, in any order
        before = len(names)
        for node in aliases:
            value = node.value
            if value is not None and is_bare_any(value, names, modules):
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None) or node.name]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
        grown = len(names) > before
    return names, modules


def is_bare_any(
    annotation: ast.expr | None,
    names: Collection[str] = frozenset({"Any"}),
    modules: Collection[str] = frozenset(TYPING_MODULES),
) -> bool:
    """``annotation`` is ``Any`` alone (``names``: what ``Any`` is called; ``modules``: what typing is called)."""
    if isinstance(annotation, ast.Name):
        return annotation.id in names
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any" and isinstance(annotation.value, ast.Name) and annotation.value.id in modules
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            parsed = ast.parse(annotation.value.strip(), mode="eval").body
        except SyntaxError:
            return False
        return is_bare_any(parsed, names, modules)
    if isinstance(annotation, ast.Subscript):  # Annotated[Any, ...] is Any
        base = annotation.value
        annotated = (isinstance(base, ast.Name) and base.id == "Annotated") or (
            isinstance(base, ast.Attribute) and base.attr == "Annotated"
        )
        first = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) else annotation.slice
        return annotated and is_bare_any(first, names, modules)
    return False


def annotations(tree: ast.AST) -> list[ast.expr]:
    """Every annotation of ``tree``: parameters, returns and annotated assignments."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
            found.extend(p.annotation for p in params if p.annotation is not None)
            if not isinstance(node, ast.Lambda) and node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def count_file(path: Path) -> tuple[int, int]:
    """(bare ``Any`` annotations, all annotations) of one source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names, modules = any_names(tree)
    found = annotations(tree)
    return sum(is_bare_any(a, names, modules) for a in found), len(found)


def count_tree(root: Path) -> dict[str, tuple[int, int]]:
    """Each ``.py`` file under ``root`` (path relative to ``root``'s parent) -> (bare ``Any``, all)."""
    return {str(p.relative_to(root.parent)): count_file(p) for p in sorted(root.rglob("*.py"))}


def main(argv: list[str] | None = None) -> dict[str, int]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=PACKAGE)
    parser.add_argument("--top", type=int, default=15, help="files to list (most bare Any first)")
    args = parser.parse_args(argv)
    counts = count_tree(args.root)
    total = sum(bare for bare, _ in counts.values())
    top = sorted(((bare, name) for name, (bare, _) in counts.items() if bare), key=lambda t: (-t[0], t[1]))
    print(f"{'bare Any':>8}  file")
    for bare, name in top[: args.top]:
        print(f"{bare:>8}  {name}")
    print(f"{total:>8}  total, in {sum(1 for _, n in top)} of {len(counts)} files")
    summary = {"bare_any": total, "files": len(counts), "annotations": sum(n for _, n in counts.values())}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
