"""``human_disagrees``: an item people overruled or flagged (``rmb audit --review``)."""

from __future__ import annotations

from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry


@defect(
    "human_disagrees",
    "an item people overruled (their strict majority picked the release's losing answer) or flagged "
    "(wrong scenario, harmful answer preferred, answer cut off, prompt leaked, not English), from "
    "`rmb review`'s labels.jsonl given as `--review`; none when no review is given.",
    rank=130,
)
def _human_disagrees(ctx: AuditContext, e: Entry) -> dict | None:
    verdict = (ctx.review or {}).get((e.item.set_name, str(e.item.uid)))
    if verdict is None:
        return None
    said = []
    if verdict["overruled"]:
        said.append(f"people's majority chose {verdict['majority']} ({verdict['labels']} labels)")
    said += [f"flagged {flag} by {', '.join(who)}" for flag, who in verdict["flags"].items()]
    return defect_entry(e, "; ".join(said), majority=verdict["majority"], flags=sorted(verdict["flags"]))
