"""The build's ``Style_set/``: the style stage's kept variants (``stages/style.py``) matched to the pairwise
items (and, with ``style.bon``, the BoN items) as the release numbers them, written beside RMB's two sets; the
stage's accounting for the manifest; the dry run's count of the stage's calls."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from rmb_build.core import atomic
from rmb_build.core.errors import RMBError
from rmb_build.core.items import BonItem
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.pipeline.executor import compute
from rmb_build.release.style_set import style_file, style_record
from rmb_build.stages import gold, guard, judge, sets, style
from rmb_build.stages.style import DROP_REASONS, Pair


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


def bon_loser(item: BonItem) -> int:
    """The loser a BoN item's variants are made of: its last, the lowest-scored (losers are ordered by score),
    so that the item's preference is its clearest."""
    return len(item.losers) - 1


def rewritten_answers(item: Any) -> tuple[str, str]:
    """The two answers of a release item that the style stage rewrites: a pairwise item's chosen and rejected,
    a BoN item's winner and :func:`bon_loser`."""
    if item.set_name == PAIRWISE_SET:
        return item.chosen.answer, item.rejected.answer
    return item.best.answer, item.losers[bon_loser(item)].answer


def pairs_of(built: Any, bon: bool) -> list[Pair]:
    """The style stage's input from one batch's sets (``stages/sets.py``'s result): every pairwise item's
    :func:`rewritten_answers`, then with ``bon`` every BoN item's."""
    notes = {(n["set"], n["uid"]): n for n in built.annotations}
    items = [*built.pairwise, *(built.bon if bon else ())]
    return [
        Pair(query_id=notes[(it.set_name, it.uid)]["query_id"], chosen=c, rejected=r, set_name=it.set_name)
        for it in items
        for c, r in [rewritten_answers(it)]
    ]


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


# The dry run (build.py's ``_plan``): its chain ran over every selected query on the planning client.
PLAN_NOTES = {
    "style_calls_at_most": "the style stage's calls are bounded in estimates: its items are pairs of judged "
    "answers, known only once every generate, judge and guard call before it is cached",
    "style_rewrite_judge_calls_at_most": "the style stage's rewrite calls are exact; the judge calls on rewrites "
    "not yet made are bounded in estimates (a failed or cut rewrite is not judged)",
}


async def plan(run: Any, planner: Any, batch: list[Any], chain: Mapping[str, Any], answers: str, step: Any) -> dict:
    """The style stage's calls on ``planner``, the estimates they leave: ``chain`` is the dry run's
    ``_llm_chain`` over ``batch`` (``answers`` the stage whose answers the sets read), ``step`` its planning
    step. Where every call before the stage (the gold check aside) is cached, the sets are the build's own:
    built here, the stage is planned on them (its rewrites counted exactly, the judge calls on cached
    rewrites too, those on rewrites still to make bounded). Otherwise only a bound (``style.calls_at_most``)."""
    if judge.SPEC.name not in chain:  # no judge stage: no sets, so no style call (as in the build)
        return {}
    # another batch's style calls are no input of this one's
    if any(c.cached is None and c.phase not in (gold.SPEC.name, style.STAGE) for c in planner.calls.values()):
        return {"style_calls_at_most": style.calls_at_most(len(batch), run.cfg)}
    labels = chain[guard.SPEC.name].value.records
    batch = guard.apply_prompt_scenarios(batch, labels)
    inputs = (batch, chain[answers].value.records, chain[judge.SPEC.name].value.records, labels)
    built = compute(sets.SPEC, run.env(sets.SPEC), inputs).value
    before = set(planner.calls)
    await step(style.SPEC, batch, pairs_of(built, run.cfg.style.bon))
    new = sum(
        1
        for key, c in planner.calls.items()
        if key not in before and c.phase == style.STAGE and c.request.stage == style.STAGE and c.cached is None
    )
    return {"style_rewrite_judge_calls_at_most": new * run.cfg.judge.samples} if new else {}


def plan_note(estimates: Mapping[str, Any]) -> str:
    """What the style stage's estimates in ``estimates`` are, for the dry run's ``exact.calls``."""
    return "".join(f"; {text}" for key, text in PLAN_NOTES.items() if key in estimates)
