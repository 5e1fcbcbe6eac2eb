"""YAML in: the one reader of a YAML file (or text) into data. What cannot be read or is not YAML is an
InputError of one line naming the file and, where the parser says, the line."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from rmb_build.core.errors import InputError


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose constructors' ValueError and OverflowError (an impossible date, a value its
    explicit tag refuses: ``!!int abc``) are a ConstructorError marked with the node's line, as its other
    errors are."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> object:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(None, None, str(exc), node.start_mark) from None


def parse_yaml(text: str, where: str) -> object:
    """``text`` (the YAML of ``where``: a file, or a packaged one's name) as data."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise InputError(where, "invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        if isinstance(exc, yaml.reader.ReaderError):  # a character the reader refuses: no mark, a position
            line = text.count("\n", 0, exc.position) + 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(where, f"invalid YAML: {problem}", line=line) from None


def read_yaml(path: str | os.PathLike) -> object:
    """The YAML file ``path``'s data."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"invalid UTF-8 at byte {exc.start}") from None
    except OSError as exc:
        raise InputError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    return parse_yaml(text, str(path))
