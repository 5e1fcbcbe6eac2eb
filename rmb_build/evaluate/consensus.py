"""Label consensus (``rmb audit RELEASE --consensus EVAL_DIR...``): the items whose label most reward models
contradict, read from three or more ``rmb evaluate`` folders of the release.

An RM's *margin* on an item is how far its labelled-better answer outscores the best other one
(``chosen - rejected``; best-of-N: ``best - max(losers)``); it *contradicts* the label when the margin is
negative. Margins are put on one scale per RM (divided by the standard deviation of that RM's margins over
the items), and items are ranked by the mean of their scaled margins, lowest first: the likeliest label
errors head the list, each with how many RMs contradict it and every RM's margin. An item is a *suspected*
label error when more than half of the RMs contradict it; a scenario's rate of suspected errors carries a
mid-p interval. Items an RM did not score (no numeric scores) are left out of its count.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from statistics import fmean, pstdev
from typing import Any, Mapping, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.intervals import mid_p
from rmb_build.evaluate.compare import read_predictions

MIN_RMS = 3
RULE = "suspected: more than half of the RMs contradict the label (their margin is negative)"


def margin(row: Mapping[str, Any]) -> float | None:
    """The RM's margin for the labelled-better answer, None when it has no numeric scores."""
    scores = row.get("scores") or {}
    if "chosen" in scores:
        values = [scores["chosen"], scores["rejected"]]
    elif "best" in scores and isinstance(scores.get("losers"), list) and scores["losers"]:
        values = [scores["best"], max(scores["losers"], default=None)]
    else:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return None
    return float(values[0] - values[1])


def consensus(evaluations: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The audit JSON's ``consensus`` from each evaluation's predictions (see the module docstring)."""
    if len(evaluations) < MIN_RMS:
        raise RMBError(f"--consensus: needs at least {MIN_RMS} evaluations of the release, got {len(evaluations)}")
    margins: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    scenario: dict[tuple[str, str], str] = {}
    scale: dict[str, float] = {}
    for name, rows in evaluations.items():
        got = {(str(r["set"]), str(r["uid"])): (margin(r), r["scenario"]) for r in rows}
        values = [m for m, _ in got.values() if m is not None]
        scale[name] = pstdev(values) if len(values) > 1 and pstdev(values) > 0 else 1.0
        for key, (m, scen) in got.items():
            scenario.setdefault(key, scen)
            if m is not None:
                margins[key][name] = m
    items: list[dict[str, Any]] = []
    for key, by_rm in margins.items():
        against = sum(m < 0 for m in by_rm.values())
        items.append(
            {
                "set": key[0],
                "uid": key[1],
                "scenario": scenario[key],
                "contradicting": against,
                "rms": len(by_rm),
                "suspected": against * 2 > len(by_rm),
                "mean_scaled_margin": fmean(m / scale[rm] for rm, m in by_rm.items()),
                "margins": by_rm,
            }
        )
    items.sort(key=lambda it: (it["mean_scaled_margin"], -it["contradicting"], it["set"], it["uid"]))
    for rank, it in enumerate(items, start=1):
        it["rank"] = rank
    per: dict[str, list[bool]] = defaultdict(list)
    for it in items:
        per[it["scenario"]].append(it["suspected"])
    scenarios = {
        s: {"items": len(v), "suspected": sum(v), "rate": sum(v) / len(v), "interval": mid_p(sum(v), len(v))}
        for s, v in sorted(per.items())
    }
    return {"evaluations": list(evaluations), "rule": RULE, "scenarios": scenarios, "items": items}


def read_evaluations(folders: Sequence[str | Path]) -> dict[str, list[dict[str, Any]]]:
    """Each folder's predictions, by the folder as given; a folder named twice is refused."""
    if len(set(map(str, folders))) != len(folders):
        raise RMBError("--consensus: an evaluation folder is named twice")
    return {str(f): read_predictions(f) for f in folders}


def format_consensus(table: dict[str, Any], limit: int = 20) -> str:
    """The printed lists: the likeliest label errors first, then each scenario's rate."""
    n = len(table["evaluations"])
    suspected = sum(it["suspected"] for it in table["items"])
    lines = [f"consensus of {n} evaluations: {suspected} of {len(table['items'])} items suspected ({table['rule']})"]
    for it in table["items"][:limit]:
        margins = ", ".join(f"{m:+.3g}" for m in it["margins"].values())
        lines.append(
            f"  {it['rank']:>4}  {it['set']:<8}  {it['uid']:<12}  {it['contradicting']}/{it['rms']} contradict  "
            f"margins {margins}  {it['scenario']}"
        )
    for s, v in table["scenarios"].items():
        lo, hi = v["interval"]
        lines.append(
            f"  {s}: {v['suspected']}/{v['items']} suspected, {100 * v['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"
        )
    return "\n".join(lines)


__all__ = ["MIN_RMS", "consensus", "format_consensus", "margin", "read_evaluations"]
