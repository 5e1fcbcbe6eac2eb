"""Baselines: ``baseline:length`` (characters of the answer) and ``baseline:random`` (seeded)."""

from __future__ import annotations

import hashlib
from typing import Sequence

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, ScoreText

BASELINES = ("length", "random")


class Baseline(RewardModel):
    kind = "baseline"

    def __init__(self, target, options):
        super().__init__(target, options)
        self.check_target(target)

    @classmethod
    def check_target(cls, target: str) -> None:
        if target not in BASELINES:
            raise RMBError(f"--rm baseline:{target}: unknown baseline (known: {', '.join(BASELINES)})")

    def describe(self) -> dict:
        return {"baseline": self.target, **({"seed": self.options.seed} if self.target == "random" else {})}

    def score_batch(self, texts: Sequence[ScoreText]) -> list[float]:
        if self.target == "length":
            return [float(len(t.answer)) for t in texts]
        # A hash of (seed, text) rather than a generator stream: the score of a text does not
        # depend on which other texts are scored with it, or in which order.
        seed = str(self.options.seed).encode()
        return [
            int.from_bytes(hashlib.sha256(seed + b"\0" + t.key.encode()).digest()[:8], "big") / 2**64 for t in texts
        ]


ADAPTERS.add(Baseline.kind, Baseline)
