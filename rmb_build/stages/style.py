"""Style variants: each pairwise item's chosen and rejected answer rewritten into RM-Bench's three styles
(concise; detailed, plain text; detailed, markdown), each rewrite checked before it is kept.

A rewrite is dropped, and counted by why, when its request fails, when it is its original again (the
whitespace aside: a small model often returns the answer as it was), when the build's judge (the scenario's
criteria) scores it more than ``max_score_shift`` from its original, or when :func:`is_refusal` reads a
refusal where the original complied or the other way round (the guard says safe/unsafe, not refusal). An
item keeps its variants only if all six rewrites pass. The originals' scores are asked again with the
judge stage's own requests, so the cache answers them. With ``style.bon`` a Best-of-N item's winner and one
loser (``Pair.set_name`` "bon") are rewritten and checked as a pair's chosen and rejected are.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from pydantic import Field

from rmb_build.core import atomic
from rmb_build.core.errors import RMBError
from rmb_build.core.items import BonItem, Item, PairwiseItem
from rmb_build.core.options import StrictModel
from rmb_build.core.prompting import load_prompt
from rmb_build.core.records import Query, Response
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.core.text import fill, last_user_turn, render_conversation
from rmb_build.llm.types import ChatRequest
from rmb_build.release.style_set import style_file, style_record
from rmb_build.stages import judge
from rmb_build.stages.common import ask, index_queries
from rmb_build.stages.options import JudgeConfig, StyleConfig
from rmb_build.stages.spec import Entry, Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the build config is the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.stages.sets import SetsResult

STAGE = "style"
STYLES = ("concise", "detailed_plain", "detailed_markdown")  # RM-Bench's order (release/style_set.py's)
SIDES = ("chosen", "rejected")
REWRITE_PROMPT = "style/rewrite.md"
DROP_REASONS = ("failed", "unchanged", "score_shift", "refusal_flip")

# A refusal opens with one of these (measured on the official sample's harmlessness answers: bench/style_refusal.py).
_VERBS = "help|assist|provide|comply|do that|fulfil|support|tell|satisfy|create|write|give|generate|share|engage|answer"
_REFUSAL = re.compile(
    r"\b(i\s*(?:'m|am)\s+(?:sorry,?\s+but|unable to|not able to)"
    rf"|i\s+must decline|i\s+(?:can(?:'|no)t|cannot|won'?t|will not)\s+(?:{_VERBS})"
    r"|i\s+(?:do not|don'?t)\s+feel comfortable"
    r"|(?:it|this) (?:is|would be) (?:not appropriate|inappropriate|illegal|unethical|not ethical|not legal))",
    re.IGNORECASE,
)
REFUSAL_WINDOW = 200  # characters of the answer's start the check reads


def is_refusal(text: str) -> bool:
    """Whether an answer declines: a refusal phrase in its first ``REFUSAL_WINDOW`` characters."""
    return bool(_REFUSAL.search(text.lstrip()[:REFUSAL_WINDOW]))


class StyleSection(StrictModel):
    """What the stage's work gets and its key reads: its options and the build's judge."""

    style: StyleConfig
    judge: JudgeConfig


def style_section(cfg: BuildConfig) -> StyleSection | None:
    """The stage's section: its options and the judge that checks its rewrites (None: no ``style:``, the stage off)."""
    return StyleSection(style=cfg.style, judge=cfg.judge) if cfg.style is not None else None


class Pair(StrictModel):
    """One pairwise item the stage rewrites: its query and its two answers."""

    query_id: str
    chosen: str
    rejected: str
    extra: dict[str, Any] = Field(default_factory=dict)
    set_name: str = PAIRWISE_SET  # BON_SET: a BoN item's winner (chosen) and one of its losers (rejected)


@dataclass(frozen=True)
class Variants:
    """One item's kept variants: the key of the item it came from (query id, chosen, rejected text)."""

    query_id: str
    chosen_text: str
    rejected_text: str
    prompt: str
    chosen: tuple[str, ...]
    rejected: tuple[str, ...]
    set_name: str = PAIRWISE_SET

    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "chosen_text": self.chosen_text,
            "rejected_text": self.rejected_text,
            "prompt": self.prompt,
            "chosen": list(self.chosen),
            "rejected": list(self.rejected),
            "set": self.set_name,
        }


def _rewrite_request(cfg: StyleConfig, q: Query, answer: str, style: str, tag: str) -> ChatRequest:
    user = fill(
        load_prompt(REWRITE_PROMPT),
        style=load_prompt(f"style/{style}.md").strip(),
        conversation=render_conversation(q.conversation),
        answer=answer,
    )
    return cfg.request((("user", user),), stage=STAGE, tag=tag)


def _response(q: Query, name: str, text: str) -> Response:
    return Response(q.id, name, "", "", text, "stop")


async def style_batch(env: StageEnv, queries: Sequence[Query], pairs: Sequence[Pair]) -> StageResult[list[Variants]]:
    """Every pair's six rewrites, checked; the pairs whose six all pass, as :class:`Variants`."""
    section: StyleSection = env.section
    cfg = section.style
    by_id = index_queries(queries)
    todo = [(n, p, by_id[p.query_id]) for n, p in enumerate(pairs) if p.query_id in by_id]
    requests = [
        _rewrite_request(cfg, q, getattr(p, side), style, f"{p.query_id}:{n}:{side}:{style}")
        for n, p, q in todo
        for side in SIDES
        for style in STYLES
    ]
    results = await ask(env.chat(), requests, desc=STAGE)
    # One judge call per original and rewrite, named so that each comes back to its pair.
    to_judge: list[Response] = []
    rewrites: dict[tuple[int, str, str], str | None] = {}
    at = 0
    for n, p, q in todo:
        for side in SIDES:
            to_judge.append(_response(q, f"{n}:{side}", getattr(p, side)))
            for style in STYLES:
                res = results[at]
                at += 1
                text = (res.text or "").strip() if res.ok and res.finish_reason in (None, "stop") else ""
                rewrites[(n, side, style)] = text or None
                if text:
                    to_judge.append(_response(q, f"{n}:{side}:{style}", text))
    judged = await judge.judge(queries, to_judge, section.judge, env.chat())
    scores = {(s.query_id, s.generator): s.mean for s in judged.records}
    dropped = dict.fromkeys(DROP_REASONS, 0)
    dropped["failed"] = len(SIDES) * len(STYLES) * (len(pairs) - len(todo))  # a pair whose query is not given
    kept_items: list[Variants] = []
    for n, p, q in todo:
        kept: dict[str, list[str]] = {side: [] for side in SIDES}
        for side in SIDES:
            original = getattr(p, side)
            base = scores.get((q.id, f"{n}:{side}"))
            for style in STYLES:
                rewrite = rewrites[(n, side, style)]
                score = scores.get((q.id, f"{n}:{side}:{style}")) if rewrite else None
                if rewrite is None or score is None or base is None:
                    dropped["failed"] += 1
                elif " ".join(rewrite.split()) == " ".join(original.split()):  # no style change: measures nothing
                    dropped["unchanged"] += 1
                elif abs(score - base) > cfg.max_score_shift:
                    dropped["score_shift"] += 1
                elif is_refusal(rewrite) != is_refusal(original):
                    dropped["refusal_flip"] += 1
                else:
                    kept[side].append(rewrite)
        if all(len(kept[side]) == len(STYLES) for side in SIDES):
            kept_items.append(
                Variants(
                    p.query_id,
                    p.chosen,
                    p.rejected,
                    last_user_turn(q.conversation),
                    tuple(kept["chosen"]),
                    tuple(kept["rejected"]),
                    p.set_name,
                )
            )
    stats = {
        "items": len(pairs),
        "kept": len(kept_items),
        "dropped_items": len(pairs) - len(kept_items),
        "rewrites": len(SIDES) * len(STYLES) * len(pairs),
        "rewrites_kept": len(SIDES) * len(STYLES) * len(pairs) - sum(dropped.values()),
        **{f"rewrites_dropped_{k}": v for k, v in dropped.items()},
        "judge_requests": judged.stats.get("requests", 0),
    }
    if cfg.bon:  # only then: without the switch the manifest's section is as it was
        stats["bon_items"] = sum(p.set_name == BON_SET for p in pairs)
        stats["bon_kept"] = sum(v.set_name == BON_SET for v in kept_items)
    return StageResult(kept_items, stats=stats)


def bon_loser(item: BonItem) -> int:
    """The loser a BoN item's variants are made of: its last, the lowest-scored (losers are ordered by score),
    so that the item's preference is its clearest."""
    return len(item.losers) - 1


def rewritten_answers(item: Item) -> tuple[str, str]:
    """The two answers of a release item that the style stage rewrites: a pairwise item's chosen and rejected,
    a BoN item's winner and :func:`bon_loser`."""
    if isinstance(item, PairwiseItem):
        return item.chosen.answer, item.rejected.answer
    return item.best.answer, item.losers[bon_loser(item)].answer


def pairs_of(section: StyleSection, built: SetsResult) -> list[Pair]:
    """The stage's input from one batch's sets (``stages/sets.py``'s result): every pairwise item's
    :func:`rewritten_answers`, then with ``style.bon`` every BoN item's."""
    notes = {(n["set"], n["uid"]): n for n in built.annotations}
    items = [*built.pairwise, *(built.bon if section.style.bon else ())]
    return [
        Pair(query_id=notes[(it.set_name, it.uid)]["query_id"], chosen=c, rejected=r, set_name=it.set_name)
        for it in items
        for c, r in [rewritten_answers(it)]
    ]


def accounting(stats: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's ``checks.style``: items and rewrites kept and dropped (by why); both balance."""
    dropped = {k: int(stats.get(f"rewrites_dropped_{k}", 0)) for k in DROP_REASONS}
    items, kept, items_dropped = (
        int(stats.get("items", 0)),
        int(stats.get("kept", 0)),
        int(stats.get("dropped_items", 0)),
    )
    rewrites, rewrites_kept = int(stats.get("rewrites", 0)), int(stats.get("rewrites_kept", 0))
    out: dict[str, object] = {
        "items": items,
        "items_kept": kept,
        "items_dropped": items_dropped,
        "rewrites": rewrites,
        "rewrites_kept": rewrites_kept,
        "rewrites_dropped": dropped,
    }
    if "bon_items" in stats:  # style.bon on: how many of the items were BoN items, and kept
        out["bon_items"], out["bon_items_kept"] = int(stats["bon_items"]), int(stats.get("bon_kept", 0))
    if items != kept + items_dropped or rewrites != rewrites_kept + sum(dropped.values()):
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

    def watch(self, entries: Iterable[Entry]) -> Iterator[Entry]:
        for item, note in entries:
            extra = {"set": BON_SET, "loser": bon_loser(item)} if isinstance(item, BonItem) else {}
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


# The dry run plans the stage as the build runs it, on each batch's sets where the plan knows them.
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


def calls_at_most(queries: int, cfg: BuildConfig) -> int:
    """The most LLM calls the stage sends for ``queries`` selected queries (build config ``cfg``): per pairwise
    item, six rewrites and the judge's samples of each (the originals' judge requests are the judge stage's,
    answered by the cache); items per query at most ``sets.max_pairs_per_query`` and one per pair of generators,
    and with ``style.bon`` one BoN item more."""
    assert cfg.style is not None  # a dry run bounds the stage only where the config has style:
    g = len(cfg.generators)
    pairs = queries * (min(cfg.sets.max_pairs_per_query, g * (g - 1) // 2) + int(cfg.style.bon))
    return pairs * len(SIDES) * len(STYLES) * (1 + cfg.judge.samples)


SPEC = StageSpec(
    STAGE,
    style_batch,
    config="style",
    section_of=style_section,
    endpoints=lambda s: [s.style.endpoint, s.judge.endpoint],
    prompts=("style", "judge", "criteria"),
    llm=True,
    answers=True,
    counts="items",
    optional=True,
    at=Position.ITEMS,
    takes=pairs_of,
    bound=calls_at_most,
    checks=accounting,
    writes=StyleWriter,
    plan_note=plan_note,
)
