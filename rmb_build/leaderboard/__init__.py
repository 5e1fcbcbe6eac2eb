"""A static leaderboard site from ``rmb evaluate`` output folders (``rmb leaderboard``); RMs are ranked only
against RMs scored on the same release (``group_by_release=True``: one table per release).

    from rmb_build.leaderboard import build_site
    build_site(["runs/eval/length", "runs/eval/random"], "site/")
"""

from __future__ import annotations

from rmb_build.leaderboard.site import build_site

__all__ = ["build_site"]
