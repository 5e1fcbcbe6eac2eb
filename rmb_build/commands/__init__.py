"""The CLI's subcommands, one module each (``configure(parser)`` and ``run(args) -> int``); ``rmb_build.cli`` wires them."""

from __future__ import annotations

import argparse
import os


def debugging(args: argparse.Namespace) -> bool:
    """Whether to show tracebacks and third-party logs: ``-v`` or ``RMB_DEBUG=1``."""
    return bool(getattr(args, "verbose", False)) or os.environ.get("RMB_DEBUG", "") not in ("", "0")
