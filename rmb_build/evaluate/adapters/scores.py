"""``scores:<file or folder>`` (also ``--scores FILE``): scores computed elsewhere, matched to the release's
items by ``(set, uid)``. The formats and the matching rules are in ``rmb_build.evaluate.scores_file``.

Nothing is scored and the score cache is not used: ``evaluate`` asks ``predict_items`` for the predictions
(``precomputed``). The fingerprint is the file's sha256, so the identity follows the scores, not the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Item
from rmb_build.evaluate.adapters import ADAPTERS, RewardModel, ScoreText
from rmb_build.evaluate.scores_file import predictions, read_scores


class ScoresFileRM(RewardModel):
    kind = "scores"
    precomputed = True  # evaluate takes predictions from predict_items instead of scoring texts

    def __init__(self, target, options):
        super().__init__(target, options)
        self.file = read_scores(target)  # read and checked now: a bad row stops before any other work

    @property
    def spec(self) -> str:
        return f"scores:{Path(self.target).name}"

    def describe(self) -> dict[str, Any]:
        return {"scores_sha256": self.file.sha256, "format": self.file.format}

    def score_batch(self, texts: Sequence[ScoreText]) -> list[float]:
        raise RMBError(f"{self.spec}: a scores file gives scores per item, not per text")

    def predict_items(
        self, items: Sequence[Item], release_items: Sequence[Item], ties: str
    ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        """(predictions of the items the file scores, ``scoring`` stats, the ``scores_file`` listing)."""
        return predictions(self.file, release_items, items, ties)


ADAPTERS.add(ScoresFileRM.kind, ScoresFileRM)
