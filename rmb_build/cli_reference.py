"""Every command's options as Markdown, from the CLI's own parsers: the docs site's command
reference (``docs/commands.md``), which a test keeps equal to this output."""

from __future__ import annotations

import argparse
import os

HEADER = """# Command reference

Every `rmb` command and its options, as `rmb COMMAND --help` prints them (this page is generated from the
CLI's parsers: `python -m rmb_build.cli_reference > docs/commands.md`; a test keeps it current).
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def markdown() -> str:
    from rmb_build.cli import COMMANDS, build_parser

    # help texts that name the user's cache folder name it as the variable, not this machine's path
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = "$XDG_CACHE_HOME"
    try:
        parser = build_parser()
    finally:
        if saved is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    out = [HEADER]
    for name, sub in _subparsers(parser).items():
        out += _section(f"rmb {name}", sub, "##", COMMANDS.get(name, ""))
    return "\n".join(out)


def _section(title: str, parser: argparse.ArgumentParser, level: str, help_text: str) -> list[str]:
    """A command's help, then each of its actions' (``rmb cache stats``, ``rmb review serve``) one level down."""
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=84, max_help_position=30)
    out = [f"{level} `{title}`", "", help_text, "", "```text", parser.format_help().rstrip(), "```", ""]
    for action, sub in _subparsers(parser).items():
        out += _section(f"{title} {action}", sub, level + "#", sub.description or "")
    return out


if __name__ == "__main__":
    print(markdown(), end="")
