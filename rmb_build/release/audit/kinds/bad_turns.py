"""``bad_turns``: a malformed conversation (roles, order, last turn)."""

from __future__ import annotations

from typing import Sequence

from rmb_build.core.items import Turn
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry
from rmb_build.release.rmb_format import VALID_ROLES


def turn_problems(turns: Sequence[Turn]) -> list[str]:
    """Why a conversation is malformed (empty list when it alternates roles and ends with a user turn)."""
    if not turns:
        return ["empty conversation"]
    problems = [f"turn {i} has unknown role {t.role!r}" for i, t in enumerate(turns) if t.role not in VALID_ROLES]
    problems += [
        f"turns {i - 1} and {i} are both {t.role!r}"
        for i, t in enumerate(turns)
        if i > 0 and t.role == turns[i - 1].role
    ]
    if turns[-1].role != "user":
        problems.append(f"ends with a {turns[-1].role!r} turn, not a user turn")
    return problems


@defect(
    "bad_turns",
    """an empty conversation, two consecutive turns with the same role, a last turn
         that is not a user turn, or a role other than user/assistant/system (which strict reading rejects).""",
    rank=110,
)
def _bad_turns(ctx: AuditContext, e: Entry) -> dict | None:
    problems = turn_problems(e.item.conversation)
    if not problems:
        return None
    return defect_entry(e, "; ".join(problems), field="conversation_input", roles=[t.role for t in e.item.conversation])
