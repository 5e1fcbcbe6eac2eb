"""People's labels of a release's items (``rmb review``): what a label may say, how it scores against the
release's own label, the people's majority, and ``labels.jsonl`` (``../shared/INTERFACES.md``, "Review labels").

A label names its item by ``(set, uid)`` and says, in the release's own terms whatever order the page
showed the answers in: pairwise ``chosen`` | ``rejected`` | ``tie`` | ``both_bad``; Best-of-N ``best`` |
``loser:<i>`` (an index into ``loser_list``) | ``tie`` | ``both_bad``. ``skip`` and ``cant_judge`` are
kept too (a person saw the item and said nothing about its answers): they are excluded from every
figure and counted, and written to ``unjudged.jsonl`` beside ``labels.jsonl`` (same fields), so that
``labels.jsonl`` holds only the choices the contract names; ``read_labels`` reads both, so the flags of
a can't-judge label (``not_english``, say) still reach the audit. ``flags`` name what the audit cannot
see (``FLAGS``).

Against the release: agreeing with ``chosen`` or ``best`` counts 1, the other side 0, ``tie`` 0.5;
``both_bad``, ``skip`` and ``cant_judge`` give no outcome. The people's majority of an item is the
choice more than half of its judging labels (skip and can't-judge left out) agree on; an item they
*overruled* is one whose majority picked the release's losing side (``rejected`` or a loser).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from rmb_build.core.errors import InputError
from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, SETS

LABELS_FILE = "labels.jsonl"
UNJUDGED_FILE = "unjudged.jsonl"  # skip and can't-judge labels, beside LABELS_FILE
TIE, BOTH_BAD, SKIP, CANT_JUDGE = "tie", "both_bad", "skip", "cant_judge"
NOT_JUDGED = (SKIP, CANT_JUDGE)
PAIRWISE_CHOICES = ("chosen", "rejected", TIE, BOTH_BAD)
FLAGS = {
    "wrong_scenario": "wrong scenario",
    "harmful_preferred": "harmful answer preferred",
    "cut_off": "answer cut off",
    "prompt_leaked": "prompt leaked",
    "not_english": "not English",
}
_LOSER = re.compile(r"loser:(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class Label:
    """One person's label of one item (``choice`` in the release's own terms)."""

    set: str
    uid: str
    annotator: str
    choice: str
    flags: tuple[str, ...] = ()
    note: str = ""
    time: str = ""
    seconds: float | None = None  # time spent on the item, where known
    extra: dict = field(default_factory=dict, compare=False)

    def to_json(self) -> dict:
        out: dict[str, object] = {
            "set": self.set,
            "uid": self.uid,
            "annotator": self.annotator,
            "choice": self.choice,
            "flags": list(self.flags),
            "note": self.note,
            "time": self.time,
        }
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 3)
        return {**out, **self.extra}


def valid_choice(set_name: str, choice: str, losers: int | None = None) -> bool:
    """Whether ``choice`` is a label of an item of ``set_name`` (with ``losers`` losers, when known)."""
    if choice in (TIE, BOTH_BAD, *NOT_JUDGED):
        return True
    if set_name == PAIRWISE_SET:
        return choice in PAIRWISE_CHOICES
    if choice == "best":
        return True
    m = _LOSER.fullmatch(choice)
    return m is not None and (losers is None or int(m.group(1)) < losers)


def outcome(choice: str) -> float | None:
    """The label scored against the release's label: 1 agrees, 0 overrules, 0.5 a tie, None no outcome."""
    if choice in ("chosen", "best"):
        return 1.0
    if choice == "rejected" or _LOSER.fullmatch(choice):
        return 0.0
    if choice == TIE:
        return 0.5
    return None


def judging(choices: Iterable[str]) -> list[str]:
    """The choices that say something about the answers (skip and can't-judge left out)."""
    return [c for c in choices if c not in NOT_JUDGED]


def majority(choices: Iterable[str]) -> str | None:
    """The choice more than half of the judging ``choices`` agree on (None: no strict majority, or none)."""
    counted = Counter(judging(choices))
    if not counted:
        return None
    (top, n), *_ = counted.most_common(1)
    return top if 2 * n > sum(counted.values()) else None


def overrules(choice: str | None) -> bool:
    """Whether ``choice`` picks the release's losing side."""
    return choice is not None and outcome(choice) == 0.0


def by_item(labels: Iterable[Label]) -> dict[tuple[str, str], list[Label]]:
    """Labels grouped by (set, uid), in first-seen order."""
    out: dict[tuple[str, str], list[Label]] = {}
    for label in labels:
        out.setdefault((label.set, label.uid), []).append(label)
    return out


def human_verdicts(labels: Iterable[Label]) -> dict[tuple[str, str], dict]:
    """Per item people overruled or flagged: ``{"majority", "labels", "overruled", "flags": {flag: [annotators]}}``."""
    out = {}
    for key, group in by_item(labels).items():
        top = majority(lb.choice for lb in group)
        flags: dict[str, list[str]] = {}
        for lb in group:
            for flag in lb.flags:
                flags.setdefault(flag, []).append(lb.annotator)
        if overrules(top) or flags:
            out[key] = {
                "majority": top,
                "labels": len(judging(lb.choice for lb in group)),
                "overruled": overrules(top),
                "flags": flags,
            }
    return out


def _text(path: str, n: int, row: Mapping, name: str, required: bool = True) -> str:
    value = row.get(name, None if required else "")
    if isinstance(value, int) and not isinstance(value, bool) and name == "uid":
        value = str(value)  # a uid written as a number
    if not isinstance(value, str) or (required and not value):
        raise InputError(path, f"expected a {'non-empty ' if required else ''}string", line=n, field=name)
    return value


def label_from_json(row: Mapping, path: str = LABELS_FILE, n: int = 0) -> Label:
    """One ``labels.jsonl`` line as a ``Label``; InputError names the file, line and field."""
    set_name = _text(path, n, row, "set")
    if set_name not in SETS:
        raise InputError(path, f"unknown set {set_name!r} (expected {' or '.join(SETS)})", line=n, field="set")
    uid, annotator, choice = (_text(path, n, row, k) for k in ("uid", "annotator", "choice"))
    if not valid_choice(set_name, choice):
        raise InputError(path, f"{choice!r} is not a {set_name} label", line=n, field="choice")
    flags = row.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise InputError(path, "expected a list of strings", line=n, field="flags")
    seconds = row.get("seconds")
    known = {"set", "uid", "annotator", "choice", "flags", "note", "time", "seconds"}
    return Label(
        set_name,
        uid,
        annotator,
        choice,
        tuple(flags),
        _text(path, n, row, "note", required=False),
        _text(path, n, row, "time", required=False),
        float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None,
        {k: v for k, v in row.items() if k not in known},
    )


def read_labels(path: str | os.PathLike) -> list[Label]:
    """Every label of a ``labels.jsonl`` and of the ``unjudged.jsonl`` beside it, where there is one; a
    second label of one (set, uid, annotator) replaces the first."""
    kept: dict[tuple[str, str, str], Label] = {}
    unjudged = Path(path).with_name(UNJUDGED_FILE)
    for file in [Path(path), *([unjudged] if unjudged.is_file() and unjudged != Path(path) else [])]:
        for n, row in read_jsonl_objects(file):
            label = label_from_json(row, str(file), n)
            kept[(label.set, label.uid, label.annotator)] = label
    return list(kept.values())


def bon_choice_index(choice: str) -> int | None:
    """The answer a BoN choice picks, as an index into ``item.answers()`` (0 the best), or None."""
    if choice == "best":
        return 0
    m = _LOSER.fullmatch(choice)
    return int(m.group(1)) + 1 if m else None


def answer_terms(set_name: str, n_answers: int) -> Sequence[str]:
    """Each answer's name in the release's terms, in ``item.answers()`` order."""
    if set_name == BON_SET:
        return ["best", *(f"loser:{i}" for i in range(n_answers - 1))]
    return ["chosen", "rejected"]


__all__ = [
    "BOTH_BAD",
    "CANT_JUDGE",
    "FLAGS",
    "LABELS_FILE",
    "Label",
    "NOT_JUDGED",
    "PAIRWISE_CHOICES",
    "SKIP",
    "TIE",
    "answer_terms",
    "bon_choice_index",
    "by_item",
    "human_verdicts",
    "judging",
    "label_from_json",
    "majority",
    "outcome",
    "overrules",
    "read_labels",
    "UNJUDGED_FILE",
    "valid_choice",
]
