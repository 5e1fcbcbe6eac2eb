"""Not a subcommand: the calls a dry run plans, as ``rmb build --dry-run`` and ``rmb downstream --dry-run``
print them, from a ``llm.planning`` estimate (its totals, ``by_phase``, ``by_endpoint``, and what the build
adds: ``estimates`` and ``exact``)."""

from __future__ import annotations

from typing import Any, Mapping


def print_plan(what: str, est: Mapping[str, Any]) -> None:
    """``what`` the run covers ("12 queries selected"), its totals, then per phase and per endpoint, then
    what is estimated and what is exact."""
    print(
        f"dry run: {what}; would send {est['calls']} calls ({est['cached']} more already cached): about "
        f"{est['prompt_tokens']} prompt tokens, {est['completion_tokens_estimate']} completion tokens (at most "
        f"{est['completion_tokens']}), at most ${est['cost_usd']:.4f}"
    )
    for title, rows in (("phase", est.get("by_phase", {})), ("endpoint", est.get("by_endpoint", {}))):
        for name, row in rows.items():
            print(f"  {title} {name}: {row['calls']} calls ({row['cached']} cached), {row['prompt_tokens']} prompt "
                  f"tokens, ${row['cost_usd']:.4f}")  # fmt: skip
    for name, value in est.get("estimates", {}).items():
        print(f"  estimate: {name.replace('_', ' ')}: {value}")
    for figure, what_it_is in est.get("exact", {}).items():
        print(f"  {figure}: {what_it_is}")
