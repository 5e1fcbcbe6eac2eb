"""What the kinds comparing preferences (``contradiction``, ``cycle``) keep of every item."""

from __future__ import annotations

from typing import Iterator

from rmb_build.core.items import PairwiseItem
from rmb_build.release.audit.kind import AuditContext, Entry
from rmb_build.release.audit.packed import Records, runs


class Preferences:
    """What the kinds comparing preferences keep: one record an edge (conversation, preferred answer,
    dispreferred answer, item, whether the item is pairwise): chosen -> rejected for a pairwise item,
    best -> each distinct loser for a BoN item, edges between equal texts left out."""

    def __init__(self, ctx: AuditContext):
        self.items = ctx.items
        self.edges = Records(("conv", "16s"), ("better", "16s"), ("worse", "16s"), ("order", "I"), ("pairwise", "?"))

    def add(self, e: Entry) -> None:
        best, pairwise = e.answer_keys[0], isinstance(e.item, PairwiseItem)
        for other in dict.fromkeys(e.answer_keys[1:]):
            if other != best:
                self.edges.append(e.conv_key, best, other, e.at.order, pairwise)

    def conversations(self, min_edges: int) -> Iterator[list[tuple[bytes, bytes, int, bool]]]:
        """Each conversation's edges (better, worse, item, pairwise) in item order, where it has
        at least ``min_edges``."""
        for run in runs(self.edges.array(), ["conv"], min_size=min_edges):
            yield list(
                zip(run["better"].tolist(), run["worse"].tolist(), run["order"].tolist(), run["pairwise"].tolist())
            )
