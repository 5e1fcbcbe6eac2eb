"""Item outcomes from scores: the rules of RMB's evaluation, one row of predictions.jsonl per item.

Pairwise: chosen > rejected scores 1; a tie 0 under ``strict`` (the official script), 0.5 under
``half``. BoN: 1 only if the best answer's score is strictly greater than every loser's.
A pair judge's "score" of an answer is the number of votes it won over both orders. An item
with a text the RM could not score (a failed generative judgement) counts as wrong.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from rmb_build.core.items import Item, PairwiseItem

TIES = ("strict", "half")


def pairwise_outcome(chosen: float, rejected: float, ties: str = "strict") -> float:
    if chosen > rejected:
        return 1.0
    if chosen == rejected:
        return 0.5 if ties == "half" else 0.0
    return 0.0


def bon_outcome(best: float, losers: Sequence[float]) -> float:
    return 1.0 if all(best > loser for loser in losers) else 0.0


def vote_counts(votes: Mapping[str, list]) -> tuple[int, int]:
    """(wins of the better-labelled answer, wins of the other) over both orders.

    ``votes["ab"]``: 1 when the better-labelled answer, shown first, won; ``votes["ba"]``: 1 when the
    other answer, shown first, won; None where the judge gave no usable verdict.
    """
    ab, ba = votes["ab"], votes["ba"]
    first = sum(v == 1 for v in ab) + sum(v == 0 for v in ba)
    second = sum(v == 0 for v in ab) + sum(v == 1 for v in ba)
    return first, second


def _length_side(item: PairwiseItem) -> str:
    c, r = len(item.chosen.answer), len(item.rejected.answer)
    return "chosen_shorter" if c < r else "chosen_longer" if c > r else "same_length"


def text_digest(item: Item) -> str:
    """sha256 over what makes two items share a text: the set, the turns' role and content, and the answers
    (chosen or best first). Lets ``rmb compare --shared-texts`` match items across releases."""
    payload = [item.set_name, [[t.role, t.content] for t in item.conversation], [a.answer for a in item.answers()]]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def predict(
    items: Sequence[Item],
    keys: Sequence[Sequence[str]],
    values: Mapping[str, Any],
    *,
    ties: str = "strict",
    judge: bool = False,
) -> list[dict[str, Any]]:
    """One prediction per item, in item order: ``set, uid, scenario, text_sha256, chance, scores, outcome``
    (+ details); ``text_sha256`` is ``text_digest(item)``.

    ``chance`` is the expected outcome of a random scorer: 1/2 for a pair, 1/(1 + losers) for BoN.

    ``keys`` are each item's unit keys from ``score_items``: its texts' (chosen/best first), or for a
    judge its (better, worse) pairs'.
    """
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    rows = []
    for item, ks in zip(items, keys):
        row: dict[str, Any] = {
            "set": item.set_name,
            "uid": item.uid,
            "scenario": item.scenario_id,
            "text_sha256": text_digest(item),
            "chance": 1 / len(item.answers()),
        }
        got = [values[k] for k in ks]
        if judge:
            row["votes"] = got
            counts = [vote_counts(v) for v in got]
        if isinstance(item, PairwiseItem):
            c, r = counts[0] if judge else got
            row["scores"] = {"chosen": c, "rejected": r}
            row["outcome"] = _failed(row) if None in (c, r) else pairwise_outcome(c, r, ties)
            row["length"] = _length_side(item)
        elif judge:
            row["scores"] = {"best": [b for b, _ in counts], "losers": [lo for _, lo in counts]}
            row["outcome"] = 1.0 if all(b > lo for b, lo in counts) else 0.0
        else:
            b, ls = got[0], got[1:]
            row["scores"] = {"best": b, "losers": ls}
            row["outcome"] = _failed(row) if None in got else bon_outcome(b, ls)
        rows.append(row)
    return rows


def _failed(row: dict[str, Any]) -> float:
    """An item with an unscored text (a failed generative judgement) counts as wrong."""
    row["failed"] = True
    return 0.0


def length_bias(predictions: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Pairwise accuracy where the chosen answer is shorter / longer / as long as the rejected one."""
    out: dict[str, dict[str, float | int | None]] = {}
    for side in ("chosen_shorter", "chosen_longer", "same_length"):
        got = [p["outcome"] for p in predictions if p.get("length") == side]
        out[side] = {"accuracy": sum(got) / len(got) if got else None, "n": len(got)}
    return out


def position_bias(predictions: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """For pair judges: how often the verdict followed the position rather than the answer.

    A (pair, sample) follows the position when the judge picked the same slot in both orders.
    ``first_position_rate`` is the share of all verdicts that picked the answer shown first.
    """
    both = follows = verdicts = first = 0
    for p in predictions:
        for votes in p.get("votes") or ():
            for ab, ba in zip(votes["ab"], votes["ba"]):
                for v in (ab, ba):
                    if v is not None:
                        verdicts += 1
                        first += v == 1
                if ab is not None and ba is not None:
                    both += 1
                    follows += ab == ba
    return {
        "position_following_rate": follows / both if both else None,
        "n_order_pairs": both,
        "first_position_rate": first / verdicts if verdicts else None,
        "n_verdicts": verdicts,
    }
