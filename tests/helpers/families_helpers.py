"""Shared by the reward-model adapter and family tests: the texts every family scores, and a small release."""

from __future__ import annotations

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.evaluate.adapters import ScoreText
from rmb_build.release.read import Release


def texts() -> list[ScoreText]:
    """Three texts of different lengths, one multi-turn, so that a batch needs padding."""
    hello = (Turn("user", "Say hello."),)
    multi = (Turn("user", "Name a colour."), Turn("assistant", "Blue."), Turn("user", "Another, with a reason?"))
    return [
        ScoreText("a", hello, "Hello!"),
        ScoreText("b", multi, "Green, like grass in spring. " * 3),
        ScoreText("c", hello, "No. " * 20),
    ]


def small_release() -> Release:
    """Mixed lengths, a multi-turn conversation, and a text shared by a pairwise and a BoN item."""
    hello = (Turn("user", "Say hello.", "en"),)
    multi = (Turn("user", "Name a colour."), Turn("assistant", "Blue."), Turn("user", "Another one, with a reason?"))
    release = Release(name="small", root=None)
    release.add(
        PairwiseItem("0", hello, Answer("a", "Hello!"), Answer("b", "No. " * 40), "Helpfulness/Chat/Discussion")
    )
    release.add(
        PairwiseItem(
            "1", multi, Answer("a", "Green, like grass in spring."), Answer("b", "Red."), "Helpfulness/Chat/Discussion"
        )
    )
    release.add(
        PairwiseItem(
            "2", hello, Answer("a", "Hi there, nice to meet you. " * 6), Answer("b", "Hello!"), "Harmlessness/S6"
        )
    )
    release.add(
        BonItem(
            "0",
            hello,
            Answer("a", "Hello!"),
            (Answer("b", "Go away."), Answer("c", "Hey " * 30)),
            "Helpfulness/Chat/Discussion",
        )
    )
    return release
