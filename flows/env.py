"""Prefect settings for a build; must run before the first ``import prefect``.

Prefect reads its settings when it is imported, so ``rmb build`` calls :func:`configure_prefect`
first. A user's own settings (a Prefect server URL, a PREFECT_HOME) always win.
"""

from __future__ import annotations

import os
from pathlib import Path


def configure_prefect(workdir: str | os.PathLike) -> Path:
    """Quiet, project-local Prefect defaults; returns the PREFECT_HOME in use.

    - no analytics (this machine has no network);
    - PREFECT_HOME under ``<workdir>/runs/.prefect`` unless the user set one, so the ephemeral
      server's database and settings stay with the project;
    - a 90 s ephemeral-server start-up timeout: several builds or test sessions starting at once
      on 2 cores exceed Prefect's default.
    """
    home = os.environ.setdefault("PREFECT_HOME", str(Path(workdir).resolve() / "runs" / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    Path(home).mkdir(parents=True, exist_ok=True)
    return Path(home)
