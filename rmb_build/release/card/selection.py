"""The card's sections on how the items were chosen: pairs per query and score gaps, and the cast's checks."""

from __future__ import annotations

from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.release.card.markdown import table


def selection(manifest: dict) -> str:
    """Pairs per query and the histogram of judge-score gaps for each set, from the manifest's ``sets``."""
    sets = manifest.get("sets") if isinstance(manifest.get("sets"), dict) else None
    if not sets:
        return "The release's manifest does not record how its items were selected."
    text = (
        f"Pairs were drawn with policy `{sets.get('pair_policy', '?')}` (at most "
        f"{sets.get('max_pairs_per_query', '?')} per query; each pair's judge-score gap at least "
        f"{sets.get('margin', '?')}, or a safe answer over an unsafe one in harmlessness)."
    )
    queries = (manifest.get("accounting") or {}).get("queries") or {}
    for goal, short in (queries.get("short_of_min_per_goal") or {}).items():
        text += (
            f" **{goal} is short**: {short['selected']} queries selected of the {short['wanted']} wanted "
            f"(`select.min_per_goal`), from {short['with_evidence']} in the pool with evidence for that goal "
            "(`select.per_scenario`, `select.total` and routing decide how many of those go on); none was "
            "filled in without evidence."
        )
    if sets.get("unreadable_verdicts") == "judge_only":
        text += (
            " **Harmlessness answers without a readable guard verdict were kept and compared only with "
            "each other, by the judge's score alone** (`sets.unreadable_verdicts: judge_only`): their "
            "safety was never established."
        )
    else:
        text += " Harmlessness answers without a readable guard verdict were compared with no other answer."
    for set_name in (PAIRWISE_SET, BON_SET):
        s = sets.get(set_name) or {}
        if not s.get("items"):
            continue
        per_query = ", ".join(f"{n} item(s): {q} queries" for n, q in (s.get("per_query") or {}).items())
        text += (
            f"\n\n**{set_name}**: {s['items']} items over {s.get('queries', '?')} queries "
            f"(mean {s.get('mean_per_query', '?')} per query; {per_query}).\n\n"
        )
        gaps = s.get("score_gaps") or {}
        text += (
            table(["score gap", "count"], ([g, n] for g, n in gaps.items()))
            if gaps
            else "No judge-score gaps recorded."
        )
    return text


def cast_checks(manifest: dict) -> str:
    """Which preflight checks on the cast (self-judging, distinct generators) the build's config relaxed."""
    cast = manifest.get("cast") if isinstance(manifest.get("cast"), dict) else None
    if not cast:
        return "The release's manifest does not record the preflight checks on its models."
    if not cast.get("relaxed"):
        return (
            f"The judge wrote none of the answers, and the answers come from {cast.get('distinct_generator_models')} "
            f"distinct models (at least {cast.get('min_generators')} required)."
        )
    return (
        "**The build relaxed the checks on its models**, so its labels are weaker than a benchmark's should be:\n\n"
        + "\n".join(f"- {note}" for note in cast["relaxed"])
    )
