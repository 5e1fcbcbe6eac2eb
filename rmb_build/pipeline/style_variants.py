"""The build's ``Style_set/``: the style stage's kept variants (``stages/style.py``) matched to the pairwise
items as the release numbers them, written beside RMB's two sets; the stage's accounting for the manifest."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from rmb_build.core import atomic
from rmb_build.core.errors import RMBError
from rmb_build.core.taxonomy import PAIRWISE_SET
from rmb_build.release.style_set import style_file, style_record
from rmb_build.stages.style import DROP_REASONS


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
    if out["items"] != out["items_kept"] + out["items_dropped"] or out["rewrites"] != out["rewrites_kept"] + sum(
        dropped.values()
    ):
        raise RMBError(f"style stage: its accounting does not balance: {out}")
    return out


def _key(query_id: str, chosen: str, rejected: str) -> tuple[str, str, str]:
    return (query_id, chosen, rejected)


class StyleWriter:
    """Collects, as the release's entries stream by, the uid of each pairwise item with kept variants, then
    writes ``Style_set/`` into the release folder; ``section`` (the manifest's ``checks.style``) gets
    ``written``."""

    def __init__(self, variants: Iterable[Mapping[str, Any]], section: dict[str, Any]) -> None:
        self.variants = {_key(v["query_id"], v["chosen_text"], v["rejected_text"]): v for v in variants}
        self.section = section
        self.found: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def watch(self, entries: Iterable[tuple[Any, dict]]) -> Iterator[tuple[Any, dict]]:
        for item, note in entries:
            if item.set_name == PAIRWISE_SET:
                v = self.variants.pop(_key(note["query_id"], item.chosen.answer, item.rejected.answer), None)
                if v is not None:
                    conversation = item.to_rmb()["conversation_input"]
                    self.found[item.scenario_id].append(
                        style_record(item.uid, v["prompt"], conversation, v["chosen"], v["rejected"], item.scenario_id)
                    )
            yield item, note

    def write(self, folder: Path) -> None:
        for scenario_id in sorted(self.found):
            atomic.write_json(folder / style_file(scenario_id), self.found[scenario_id])
        self.section["written"] = sum(len(r) for r in self.found.values())
        self.section["unmatched"] = len(self.variants)
