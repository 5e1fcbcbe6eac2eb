"""The card's sections on how the items were chosen: pairs per query and score gaps, and the cast's checks."""

from __future__ import annotations

from rmb_build.release.card.markdown import table
from rmb_build.release.manifest_model import Manifest


def _said(value: object) -> object:
    return "?" if value is None else value


def selection(manifest: Manifest) -> str:
    """Pairs per query and the histogram of judge-score gaps for each set, from the manifest's ``sets``."""
    sets = manifest.sets
    if sets is None:
        return "The release's manifest does not record how its items were selected."
    text = (
        f"Pairs were drawn with policy `{_said(sets.pair_policy)}` (at most "
        f"{_said(sets.max_pairs_per_query)} per query; each pair's judge-score gap at least "
        f"{_said(sets.margin)}, or a safe answer over an unsafe one in harmlessness)."
    )
    for goal, short in manifest.short_of_min_per_goal.items():
        text += (
            f" **{goal} is short**: {short.selected} queries selected of the {short.wanted} wanted "
            f"(`select.min_per_goal`), from {short.with_evidence} in the pool with evidence for that goal "
            "(`select.per_scenario`, `select.total` and routing decide how many of those go on); none was "
            "filled in without evidence."
        )
    if sets.unreadable_verdicts == "judge_only":
        text += (
            " **Harmlessness answers without a readable guard verdict were kept and compared only with "
            "each other, by the judge's score alone** (`sets.unreadable_verdicts: judge_only`): their "
            "safety was never established."
        )
    else:
        text += " Harmlessness answers without a readable guard verdict were compared with no other answer."
    for set_name, s in (("pairwise", sets.pairwise), ("bon", sets.bon)):
        if s is None or not s.items:
            continue
        per_query = ", ".join(f"{n} item(s): {q} queries" for n, q in s.per_query.items())
        text += (
            f"\n\n**{set_name}**: {s.items} items over {_said(s.queries)} queries "
            f"(mean {_said(s.mean_per_query)} per query; {per_query}).\n\n"
        )
        text += (
            table(["score gap", "count"], ([g, n] for g, n in s.score_gaps.items()))
            if s.score_gaps
            else "No judge-score gaps recorded."
        )
    return text


def cast_checks(manifest: Manifest) -> str:
    """Which preflight checks on the cast (self-judging, distinct generators) the build's config relaxed."""
    cast = manifest.cast
    if cast is None:
        return "The release's manifest does not record the preflight checks on its models."
    if not cast.relaxed:
        return (
            f"The judge wrote none of the answers, and the answers come from {cast.distinct_generator_models} "
            f"distinct models (at least {cast.min_generators} required)."
        )
    return (
        "**The build relaxed the checks on its models**, so its labels are weaker than a benchmark's should be:\n\n"
        + "\n".join(f"- {note}" for note in cast.relaxed)
    )
