"""Which items people review, and who sees which.

``stratified_sample`` draws ``n`` items spread evenly over goals, then over each goal's (set, scenario)
cells: round robin over the goals, and within a goal round robin over its cells, each cell's items in a
seeded random order; a cell or goal that runs out leaves its turn to the others. The sample's order is
the draw order, so any prefix of it is spread as evenly as the whole.

``assign``: the first ``round(overlap * n)`` items of the sample go to every annotator (so agreement
between people can be measured); each of the rest goes to the annotator who has fewest items in all,
then of its goal, then of its cell, so shares differ by one item at most and each is spread over goals
and cells as the sample is. Each annotator sees their items in their own seeded random order, except
under a queue (``queued_sample``: an audit's consensus ranking, likeliest label errors first), whose order
every annotator keeps so that people check the likeliest errors first.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence


@dataclass(frozen=True, slots=True)
class ItemKey:
    """A release item as the review plans it: ``(set, uid)`` and where it lives."""

    set: str
    uid: str
    scenario: str

    @property
    def goal(self) -> str:
        return self.scenario.split("/", 1)[0]


def _round_robin(streams: Sequence[Iterator[ItemKey]]) -> Iterator[ItemKey]:
    live = list(streams)
    while live:
        still = []
        for stream in live:
            item = next(stream, None)
            if item is not None:
                yield item
                still.append(stream)
        live = still


def stratified_sample(items: Iterable[ItemKey], n: int | None, seed: int) -> list[ItemKey]:
    """``n`` items (all when None or more than there are), spread over goals, then (set, scenario) cells."""
    rng = random.Random(seed)
    cells: dict[str, dict[tuple[str, str], list[ItemKey]]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        cells[item.goal][(item.set, item.scenario)].append(item)
    goal_streams = []
    for goal in sorted(cells):
        cell_keys = sorted(cells[goal])
        rng.shuffle(cell_keys)
        streams = []
        for key in cell_keys:
            members = sorted(cells[goal][key], key=lambda it: it.uid)
            rng.shuffle(members)
            streams.append(iter(members))
        goal_streams.append(_round_robin(streams))
    rng.shuffle(goal_streams)
    out = []
    for item in _round_robin(goal_streams):
        if n is not None and len(out) >= n:
            break
        out.append(item)
    return out


def queued_sample(items: Iterable[ItemKey], queue: Sequence[tuple[str, str]], n: int | None) -> list[ItemKey]:
    """The first ``n`` (all when None) of the release's items named by ``queue`` ((set, uid) pairs), in its order."""
    by_key = {(it.set, it.uid): it for it in items}
    out = [by_key[key] for key in dict.fromkeys(queue) if key in by_key]
    return out if n is None else out[:n]


def assign(
    sample: Sequence[ItemKey], annotators: Sequence[str], overlap: float, seed: int, keep_order: bool = False
) -> dict[str, list[tuple[ItemKey, bool]]]:
    """Each annotator's items in the order they will see them (``keep_order``: the sample's), each with whether
    it is shared."""
    shared_n = 0 if len(annotators) == 1 else round(overlap * len(sample))
    shared, rest = sample[:shared_n], sample[shared_n:]
    dealt: dict[str, list[ItemKey]] = {name: [] for name in annotators}
    in_cell: dict[tuple[str, str, str], int] = defaultdict(int)
    in_goal: dict[tuple[str, str], int] = defaultdict(int)
    for item in rest:  # to whoever has fewest in all, then of its goal, then of its cell
        name = min(
            annotators,
            key=lambda a: (len(dealt[a]), in_goal[(a, item.goal)], in_cell[(a, item.set, item.scenario)]),
        )
        dealt[name].append(item)
        in_cell[(name, item.set, item.scenario)] += 1
        in_goal[(name, item.goal)] += 1
    out: dict[str, list[tuple[ItemKey, bool]]] = {}
    for name in annotators:
        mine = [(it, True) for it in shared] + [(it, False) for it in dealt[name]]
        if keep_order:
            place = {it: i for i, it in enumerate(sample)}
            mine.sort(key=lambda pair: place[pair[0]])
        else:
            random.Random(f"{seed}:order:{name}").shuffle(mine)
        out[name] = mine
    return out


def answer_order(n_answers: int, seed: int, annotator: str, item: ItemKey) -> list[int]:
    """The order one annotator sees an item's answers in: indices into ``item.answers()``."""
    order = list(range(n_answers))
    random.Random(f"{seed}:answers:{annotator}:{item.set}:{item.uid}").shuffle(order)
    return order


__all__ = ["ItemKey", "answer_order", "assign", "queued_sample", "stratified_sample"]
