"""Shared by the reward-model family tests: the texts every family scores."""

from __future__ import annotations

from rmb_build.evaluate.adapters import ScoreText
from rmb_build.items import Turn


def texts() -> list[ScoreText]:
    """Three texts of different lengths, one multi-turn, so that a batch needs padding."""
    hello = (Turn("user", "Say hello."),)
    multi = (Turn("user", "Name a colour."), Turn("assistant", "Blue."), Turn("user", "Another, with a reason?"))
    return [ScoreText("a", hello, "Hello!"), ScoreText("b", multi, "Green, like grass in spring. " * 3),
            ScoreText("c", hello, "No. " * 20)]
