"""``rmb review export``: ``labels.jsonl`` (the judging labels: the choices ``../shared/INTERFACES.md`` names),
``unjudged.jsonl`` (skip and can't-judge, same fields), ``agreement.json`` + ``agreement.md`` and ``gold/``,
an RMB-layout release of the items people agreed on.

An item is gold when at least two people gave it a judging label and more than half of those agree
on one answer: pairwise ``chosen`` (the item as it is) or ``rejected`` (chosen and rejected swapped);
Best-of-N ``best`` or ``loser:<i>`` (that loser becomes ``bon_best``, the old best joins the losers in
its place). A majority for ``tie`` or ``both_bad`` says no answer is better: not gold. A single
person's label counts in the figures but never makes gold.
"""

from __future__ import annotations

import os
from pathlib import Path

from rmb_build.core import atomic
from rmb_build.core.items import BonItem, Item, PairwiseItem
from rmb_build.release.read import Release
from rmb_build.release.review_labels import (
    LABELS_FILE,
    NOT_JUDGED,
    UNJUDGED_FILE,
    Label,
    bon_choice_index,
    by_item,
    judging,
    majority,
)
from rmb_build.release.write import write_release
from rmb_build.review import agreement as figures
from rmb_build.review.store import ReviewStore

AGREEMENT_JSON, AGREEMENT_MD, GOLD_DIR = "agreement.json", "agreement.md", "gold"


def gold_item(item: Item, choice: str) -> Item | None:
    """The item with the people's ``choice`` as its label (None: the choice prefers no answer)."""
    if isinstance(item, PairwiseItem):
        if choice == "chosen":
            return item
        if choice == "rejected":
            return PairwiseItem(
                item.uid, item.conversation, item.rejected, item.chosen, item.scenario_id, item.category_path
            )
        return None
    index = bon_choice_index(choice)
    if index is None or index > len(item.losers):
        return None
    if index == 0:
        return item
    losers = list(item.losers)
    best, losers[index - 1] = losers[index - 1], item.best
    return BonItem(item.uid, item.conversation, best, tuple(losers), item.scenario_id, item.category_path)


def gold_release(release: Release, labels: list[Label]) -> tuple[Release, list[dict]]:
    """The agreed items in release order, and one annotation line each (the people's verdict)."""
    grouped = by_item(labels)
    gold = Release(name=f"{release.name}-gold", root=None, manifest=None)
    notes = []
    for item in release.items():
        group = grouped.get((item.set_name, str(item.uid)))
        if not group:
            continue
        judged = judging(lb.choice for lb in group)
        top = majority(judged)
        if len(judged) < 2 or top is None:
            continue
        agreed = gold_item(item, top)
        if agreed is None:
            continue
        gold.add(agreed)
        notes.append(
            {
                "set": item.set_name,
                "uid": str(item.uid),
                "review": {
                    "majority": top,
                    "labels": {lb.annotator: lb.choice for lb in group},
                    "relabelled": agreed is not item,
                },
            }
        )
    return gold, notes


def export(store: ReviewStore, release: Release, out: str | os.PathLike) -> dict:
    """Write the review's files under ``out``; returns a summary (counts and paths)."""
    sha = store.check_release(release)
    meta = store.meta()
    out = Path(out)
    labels = store.labels()
    items = store.items()
    atomic.write_jsonl(out / LABELS_FILE, [lb.to_json() for lb in labels if lb.choice not in NOT_JUDGED])
    atomic.write_jsonl(out / UNJUDGED_FILE, [lb.to_json() for lb in labels if lb.choice in NOT_JUDGED])
    report = figures.agreement(labels, items)
    report["release"] = {"name": meta.get("release_name", release.name), "sha256": sha}
    gold, notes = gold_release(release, labels)
    report["gold"] = {"items": len(notes), "relabelled": sum(n["review"]["relabelled"] for n in notes)}
    atomic.write_json(out / AGREEMENT_JSON, report)
    atomic.write_text(out / AGREEMENT_MD, figures.markdown(report, report["release"]["name"]))
    manifest = {
        "name": gold.name,
        "review": {"release": report["release"], "labels": len(labels), "gold_items": len(notes)},
    }
    if notes:
        write_release(gold, out / GOLD_DIR, annotations=notes, manifest=manifest)
    return {"labels": len(labels), "items": len(items), "gold": len(notes), "report": report}


__all__ = ["AGREEMENT_JSON", "AGREEMENT_MD", "GOLD_DIR", "export", "gold_item", "gold_release"]
