"""How many annotations under ``rmb_build/`` are exactly ``Any``: the count issue 51 bounds (at most 60).

By the AST, an annotation counts when it is the name ``Any`` alone (``Any``, ``typing.Any``, or the string
``"Any"``): a parameter's (``*args`` and ``**kwargs`` too), a return's, or an annotated assignment's (class
fields included). ``dict[str, Any]`` or ``Any | None`` do not count: they say what holds the unknown.

Run: ``python bench/typing_count.py [ROOT] [--top N]``; prints the top files, then one JSON line
(``{"bare_any": total, "files": n, "annotations": n}``).
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rmb_build"


def is_bare_any(annotation: ast.expr | None) -> bool:
    """``annotation`` is ``Any`` alone."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any" and isinstance(annotation.value, ast.Name) and annotation.value.id == "typing"
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in ("Any", "typing.Any")
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
    found = annotations(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return sum(map(is_bare_any, found)), len(found)


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
