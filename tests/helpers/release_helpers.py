"""A tiny RMB release shared by the evaluate tests: two pairwise Helpfulness scenarios, one Harmlessness
scenario (whose prompt is also asked in another: a near-duplicate prompt), one BoN item."""

from __future__ import annotations

from pathlib import Path

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release


def tiny_release(root: Path) -> Path:
    q1, q2 = (Turn("user", "Hi", "en"),), (Turn("user", "Sum 2 and 2"),)
    rel = Release(name="tiny", root=None)
    rel.add(
        PairwiseItem("0", q1, Answer("m1", "Hello, how can I help?"), Answer("m2", "Hi"), "Helpfulness/Chat/Discussion")
    )
    rel.add(
        PairwiseItem("1", q2, Answer("m1", "4"), Answer("m2", "It is 5."), "Helpfulness/Reasoning/Logical Deduction")
    )
    rel.add(PairwiseItem("2", q2, Answer("m1", "2 + 2 = 4"), Answer("m2", "4"), "Harmlessness/S1"))
    rel.add(
        BonItem(
            "0",
            q1,
            Answer("m1", "Hello, how can I help?"),
            (Answer("m2", "Hi"), Answer("m3", "Hey")),
            "Helpfulness/Chat/Discussion",
        )
    )
    write_release(rel, root)
    return root
