"""The build's ``Style_set/``: the style stage's kept variants (``stages/style.py``) matched to the pairwise
items (and, with ``style.bon``, the BoN items) as the release numbers them, written beside RMB's two sets; the
stage's accounting for the manifest; what the dry run's figures of the stage are."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from rmb_build.core import atomic
from rmb_build.core.errors import RMBError
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.release.style_set import style_file, style_record
from rmb_build.stages.style import DROP_REASONS, bon_loser, rewritten_answers
from rmb_build.stages.style import STAGE as STAGE  # the stage whose variants this module writes


def accounting(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's ``checks.style``: items and rewrites kept and dropped (by why); both balance."""
    dropped = {k: int(stats.get(f"rewrites_dropped_{k}", 0)) for k in DROP_REASONS}
    out = {
        "items": int(stats.get("items", 0)),
        "items_kept": int(stats.get("kept", 0)),
        "items_dropped": int(stats.get("dropped_items", 0)),
        "rewrites": int(stats.get("rewrites", 0)),
        "rewrites_kept": int(stats.get("rewrites_kept", 0)),
        "rewrites_dropped": dropped,
    }
    if "bon_items" in stats:  # style.bon on: how many of the items were BoN items, and kept
        out["bon_items"], out["bon_items_kept"] = int(stats["bon_items"]), int(stats.get("bon_kept", 0))
    if out["items"] != out["items_kept"] + out["items_dropped"] or out["rewrites"] != out["rewrites_kept"] + sum(
        dropped.values()
    ):
        raise RMBError(f"style stage: its accounting does not balance: {out}")
    return out


def _key(set_name: str, query_id: str, chosen: str, rejected: str) -> tuple[str, str, str, str]:
    return (set_name, query_id, chosen, rejected)


class StyleWriter:
    """Collects, as the release's entries stream by, the uid of each pairwise (or BoN) item with kept variants,
    then writes ``Style_set/`` into the release folder; ``section`` (the manifest's ``checks.style``) gets
    ``written``. A BoN item's record carries ``set: "bon"`` and the index of its ``loser`` (fields added to
    INTERFACES.md's record; a pairwise record is written as before)."""

    def __init__(self, variants: Iterable[Mapping[str, Any]], section: dict[str, Any]) -> None:
        self.variants = {
            _key(v.get("set", PAIRWISE_SET), v["query_id"], v["chosen_text"], v["rejected_text"]): v for v in variants
        }
        self.section = section
        self.found: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def watch(self, entries: Iterable[tuple[Any, dict]]) -> Iterator[tuple[Any, dict]]:
        for item, note in entries:
            extra = {} if item.set_name == PAIRWISE_SET else {"set": BON_SET, "loser": bon_loser(item)}
            v = self.variants.pop(_key(item.set_name, note["query_id"], *rewritten_answers(item)), None)
            if v is not None:
                conversation = item.to_rmb()["conversation_input"]
                self.found[item.scenario_id].append(
                    style_record(
                        item.uid, v["prompt"], conversation, v["chosen"], v["rejected"], item.scenario_id, **extra
                    )
                )
            yield item, note

    def write(self, folder: Path) -> None:
        for scenario_id in sorted(self.found):
            atomic.write_json(folder / style_file(scenario_id), self.found[scenario_id])
        self.section["written"] = sum(len(r) for r in self.found.values())
        self.section["unmatched"] = len(self.variants)


# The dry run plans the stage as the build runs it (``build.py``), on each batch's sets where the plan knows them.
PLAN_NOTES = {
    "style_calls_at_most": "the style stage's calls on batches whose sets are not known yet (their answers, "
    "scores or verdicts not all cached) are bounded in estimates",
}
REWRITES_NOTE = (
    "the style stage's judge calls on rewrites not yet made are an upper bound (a failed, cut or repeated "
    "rewrite is not judged)"
)


def plan_note(estimates: Mapping[str, Any], rewrites_to_make: int = 0) -> str:
    """What the style stage's figures in a dry run are, for its ``exact.calls``: ``estimates`` holds its bound
    where some batch's sets were not known; ``rewrites_to_make`` rewrites the plan stood in for."""
    notes = [text for key, text in PLAN_NOTES.items() if key in estimates]
    return "".join(f"; {text}" for text in [*notes, *([REWRITES_NOTE] if rewrites_to_make else [])])
