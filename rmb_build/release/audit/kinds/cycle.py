"""``cycle``: three or more answers of one conversation preferred in a loop."""

from __future__ import annotations

from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from typing import Iterable

from rmb_build.core.taxonomy import PAIRWISE_SET
from rmb_build.release.audit.kind import defect, defect_entry
from rmb_build.release.audit.kinds._preferences import Preferences


def _items_on_the_cycle(entry: dict) -> list[dict]:
    return list(entry.get("items") or [entry])


def _has_loop(edges: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the directed graph of ``edges`` has a cycle (of any length)."""
    graph: TopologicalSorter[bytes] = TopologicalSorter()
    for better, worse in edges:
        graph.add(worse, better)
    try:
        graph.prepare()
    except CycleError:
        return True
    return False


@defect(
    "cycle",
    """three or more distinct answers of one conversation preferred in a loop (A > B > C > A).
         Per conversation, a directed graph over its answers' identity texts: an edge chosen -> rejected for
         each pairwise item, best -> each loser for each BoN item (edges between equal texts left out). Each
         elementary cycle of length >= 3 (no answer repeated; rotations are the same cycle) is one entry;
         two-answer loops are ``contradiction``. The entry names the cycle's earliest item; ``items`` lists
         every item stating one of its preferences, ``answers`` the cycle's length. All of them are removed:
         no preference on the loop can be trusted.""",
    removes=_items_on_the_cycle,
    rank=60,
)
class _Cycles(Preferences):
    def finish(self) -> list[dict]:
        out = []
        for edges in self.conversations(min_edges=3):  # a loop of three answers needs three preferences
            conv_edges: dict[tuple[bytes, bytes], list[int]] = defaultdict(list)  # -> items stating it
            for better, worse, order, _ in edges:
                conv_edges[(better, worse)].append(order)
            # most conversations' preferences have no loop: the stdlib's check spares networkx's import
            # (~10 MB resident) where nothing needs enumerating
            if len(conv_edges) < 3 or not _has_loop(conv_edges):
                continue
            import networkx as nx

            graph = nx.DiGraph(list(conv_edges))
            for cycle in nx.simple_cycles(graph):
                if len(cycle) < 3:
                    continue
                steps = list(zip(cycle, cycle[1:] + cycle[:1]))
                items = [self.items.at(x) for x in sorted({x for step in steps for x in conv_edges[step]})]
                out.append(
                    defect_entry(
                        items[0],
                        f"{len(cycle)} answers preferred in a loop by "
                        f"{', '.join(f'{x.set} uid {x.uid}' for x in items)}",
                        answers=len(cycle),
                        items=[x.ref() for x in items],
                    )
                )
        out.sort(
            key=lambda d: (
                d["set"] != PAIRWISE_SET,
                d["file"],
                d["index"],
                [(r["file"], r["index"]) for r in d["items"]],
            )
        )
        return out
