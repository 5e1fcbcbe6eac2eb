"""``contradiction``: two items of one conversation preferring opposite answers."""

from __future__ import annotations

from collections import defaultdict

from rmb_build.core.taxonomy import PAIRWISE_SET
from rmb_build.release.audit.kind import defect, defect_entry
from rmb_build.release.audit.kinds._preferences import Preferences


def _both_items(entry: dict) -> list[dict]:
    return [entry, entry["other"]]


@defect(
    "contradiction",
    """one entry per conflicting pair of items: two pairwise items on the same
         conversation, one preferring A to B and the other B to A (A != B); or a BoN item and a pairwise
         item on the same conversation where the pairwise item prefers one of the BoN item's losers to its
         best answer. The entry names the later pairwise item (or the BoN item); ``other`` the second one.
         Both items are removed.""",
    removes=_both_items,
    rank=50,
)
class _Contradictions(Preferences):
    def finish(self) -> list[dict]:
        at, out = self.items.at, []
        for edges in self.conversations(min_edges=2):
            prefers: dict[tuple[bytes, bytes], list[int]] = defaultdict(list)  # pairwise items only
            for better, worse, order, pairwise in edges:
                if pairwise:
                    prefers[(better, worse)].append(order)
            for better, worse, order, pairwise in edges:
                for other in prefers.get((worse, better), ()):
                    if pairwise and other > order:
                        continue  # each conflicting pair of pairwise items once, named by its later item
                    y = at(other)
                    detail = (
                        f"prefers the answer that pairwise uid {y.uid} rejects, and rejects the one it prefers"
                        if pairwise
                        else f"pairwise uid {y.uid} prefers one of this item's losers to its best answer"
                    )
                    out.append(defect_entry(at(order), detail, other=y.ref()))
        out.sort(
            key=lambda d: (d["set"] != PAIRWISE_SET, d["file"], d["index"], d["other"]["file"], d["other"]["index"])
        )
        return out
