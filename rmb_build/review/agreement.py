"""The figures a review gives: how far people agree with each other, and with the release's labels.

- Between people, on the items several of them labelled: Krippendorff's alpha for nominal data
  (``krippendorff_alpha``: any number of people per item, missing labels allowed, any set of choices,
  so Best-of-N's varying number of answers needs nothing special), per set; and Cohen's kappa
  (``cohen_kappa``) where exactly two people labelled pairwise items. Skip and can't-judge are missing
  labels. When every label is the same, chance agreement is total and neither figure is defined: the
  figure is None with ``"note": "no variation"``, never a division by zero.
- With the release: each annotator's labels, and the people's majority (``review_labels.majority``),
  scored 1 / 0 / 0.5 (``review_labels.outcome``), overall, per goal and per scenario of each set,
  with the evaluator's intervals (``core.intervals.mean_interval``: mid-p, or Wilson's interval at the
  outcomes' own effective size where ties count half); ``both_bad``, ``skip`` and ``cant_judge`` are
  excluded and counted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import permutations
from typing import Iterable, Mapping, Sequence

import numpy as np

from rmb_build.core.intervals import FEW_MARK, METHOD, few_count_note, few_items, mean_interval
from rmb_build.core.taxonomy import PAIRWISE_SET, SETS
from rmb_build.release.review_labels import Label, by_item, judging, majority, outcome, overrules
from rmb_build.review.sample import ItemKey

MAJORITY = "majority"
NO_VARIATION = "no variation"


def krippendorff_alpha(units: Iterable[Sequence[str | None]]) -> dict:
    """Nominal alpha over ``units`` (each the labels one item got; None is a missing label).

    ``{"value", "units", "pairable_values", "note"}``: units with fewer than two labels are not pairable
    and do not count; ``value`` None with a note when nothing is pairable or there is no variation."""
    coincidence: dict[tuple[str, str], float] = defaultdict(float)
    n_units = 0
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        n_units += 1
        for a, b in permutations(range(m), 2):
            coincidence[(values[a], values[b])] += 1.0 / (m - 1)
    totals: Counter[str] = Counter()
    for (c, _), w in coincidence.items():
        totals[c] += w
    n = sum(totals.values())
    out = {"value": None, "units": n_units, "pairable_values": round(n), "note": ""}
    if n_units == 0:
        out["note"] = "no item labelled by two people"
        return out
    observed = sum(w for (c, k), w in coincidence.items() if c != k)
    expected = (n * n - sum(t * t for t in totals.values())) / (n - 1)
    if expected == 0:
        out["note"] = NO_VARIATION
        return out
    out["value"] = 1.0 - observed / expected
    return out


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> dict:
    """Cohen's kappa of two people over the items both labelled: ``{"value", "n", "note"}``."""
    n = len(pairs)
    out = {"value": None, "n": n, "note": ""}
    if n == 0:
        out["note"] = "no item labelled by both"
        return out
    p_o = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    p_e = sum(first[c] * second[c] for c in first) / (n * n)
    if p_e == 1.0:
        out["note"] = NO_VARIATION
        return out
    out["value"] = (p_o - p_e) / (1.0 - p_e)
    return out


def _figure(outcomes: list[float], stratum: str) -> dict:
    arr = np.asarray(outcomes, dtype=float)
    return {
        "value": float(arr.mean()),
        "n": len(arr),
        "ci95": mean_interval(arr, stratum=stratum),
        "few_items": few_items(len(arr)),
    }


def _scored(choices: Mapping[ItemKey, str], who: str) -> dict:
    """One annotator's (or the majority's) agreement with the release, per set: overall, goals, scenarios."""
    out = {}
    for set_name in SETS:
        groups: dict[str, dict[str, list[float]]] = {"overall": defaultdict(list), "goals": defaultdict(list)}
        groups["scenarios"] = defaultdict(list)
        excluded: Counter[str] = Counter()
        for key, choice in choices.items():
            if key.set != set_name:
                continue
            score = outcome(choice)
            if score is None:
                excluded[choice] += 1
                continue
            groups["overall"]["all"].append(score)
            groups["goals"][key.goal].append(score)
            groups["scenarios"][key.scenario].append(score)
        labelled = sum(len(v) for v in groups["overall"].values()) + sum(excluded.values())
        if not labelled:
            continue
        all_scores = groups["overall"].get("all", [])
        out[set_name] = {
            "overall": _figure(all_scores, f"{who}/{set_name}") if all_scores else None,
            "goals": {g: _figure(v, f"{who}/{set_name}/{g}") for g, v in sorted(groups["goals"].items())},
            "scenarios": {s: _figure(v, f"{who}/{set_name}/{s}") for s, v in sorted(groups["scenarios"].items())},
            "excluded": dict(sorted(excluded.items())),
            "labels": labelled,
        }
    return out


def agreement(labels: Sequence[Label], items: Mapping[tuple[str, str], ItemKey]) -> dict:
    """Every figure of ``agreement.json`` from the labels and the items they name (set, uid -> ItemKey)."""
    grouped = by_item(labels)
    per_person: dict[str, dict[ItemKey, str]] = defaultdict(dict)
    for label in labels:
        per_person[label.annotator][items[(label.set, label.uid)]] = label.choice
    majorities: dict[ItemKey, str] = {}
    no_majority = 0
    for key, group in grouped.items():
        if not judging(lb.choice for lb in group):
            continue
        top = majority(lb.choice for lb in group)
        if top is None:
            no_majority += 1
        else:
            majorities[items[key]] = top
    between = {}
    for set_name in SETS:
        shared = {k: g for k, g in grouped.items() if k[0] == set_name and len(g) > 1}
        alpha = krippendorff_alpha(
            [[None if lb.choice in ("skip", "cant_judge") else lb.choice for lb in g] for g in shared.values()]
        )
        entry = {"krippendorff_alpha": alpha}
        people = sorted({lb.annotator for g in shared.values() for lb in g})
        if set_name == PAIRWISE_SET and len(people) == 2:
            pairs = []
            for g in shared.values():
                mine = {lb.annotator: lb.choice for lb in g if lb.choice not in ("skip", "cant_judge")}
                if len(mine) == 2:
                    pairs.append((mine[people[0]], mine[people[1]]))
            entry["cohen_kappa"] = {**cohen_kappa(pairs), "annotators": people}
        if shared:
            between[set_name] = entry
    overruled = []
    for key, group in grouped.items():
        top = majority(lb.choice for lb in group)
        if overrules(top):
            item = items[key]
            overruled.append(
                {
                    "set": item.set,
                    "uid": item.uid,
                    "scenario": item.scenario,
                    "majority": top,
                    "labels": {lb.annotator: lb.choice for lb in group},
                }
            )
    return {
        "schema_version": 1,
        "labels": len(labels),
        "items": len(grouped),
        "annotators": {
            name: {"labels": len(choices), **_scored(choices, name)} for name, choices in sorted(per_person.items())
        },
        MAJORITY: {"items": len(majorities), "no_majority": no_majority, **_scored(majorities, MAJORITY)},
        "between_people": between,
        "overruled": overruled,
        "interval_method": METHOD,
    }


def _cell(fig: dict | None) -> str:
    if not fig:
        return "—"
    lo, hi = fig["ci95"]
    mark = FEW_MARK if fig["few_items"] else ""
    return f"{fig['value']:.3f}{mark} [{lo:.3f}, {hi:.3f}] (n={fig['n']})"


def _said(fig: dict) -> str:
    return f"{fig['value']:.3f}" if fig["value"] is not None else fig["note"]


def markdown(report: dict, release: str) -> str:
    """``agreement.md``: the same figures for people to read."""
    lines = [f"# People's labels of {release}", ""]
    lines += [f"{report['labels']} labels of {report['items']} items.", "", "## Between people", ""]
    if not report["between_people"]:
        lines.append("No item was labelled by two people.")
    for set_name, entry in report["between_people"].items():
        alpha = entry["krippendorff_alpha"]
        lines.append(
            f"- {set_name}: Krippendorff's alpha (nominal) {_said(alpha)} over {alpha['units']} items "
            f"({alpha['pairable_values']} labels)"
        )
        if "cohen_kappa" in entry:
            kappa = entry["cohen_kappa"]
            lines.append(
                f"- {set_name}: Cohen's kappa ({' and '.join(kappa['annotators'])}) {_said(kappa)} over {kappa['n']} items"
            )
    lines += ["", "## Against the release's labels", ""]
    lines.append(
        "Agreeing with `chosen`/`best` counts 1, the other side 0, a tie 0.5; both bad, skip and can't judge are left out (counted below)."
    )
    who = {**{f"annotator {n}": v for n, v in report["annotators"].items()}, "people's majority": report[MAJORITY]}
    for title, figures in who.items():
        for set_name in SETS:
            if set_name not in figures:
                continue
            f = figures[set_name]
            lines += ["", f"### {title}, {set_name}", "", "| group | agreement [95% interval] |", "| --- | --- |"]
            lines.append(f"| overall | {_cell(f['overall'])} |")
            lines += [f"| {g} | {_cell(v)} |" for g, v in f["goals"].items()]
            lines += [f"| {s} | {_cell(v)} |" for s, v in f["scenarios"].items()]
            if f["excluded"]:
                lines += ["", "Left out: " + ", ".join(f"{k} {v}" for k, v in f["excluded"].items())]
    lines += ["", f"{FEW_MARK}: {few_count_note()}.", "", "## Items people overruled", ""]
    if not report["overruled"]:
        lines.append("None.")
    for o in report["overruled"]:
        said = ", ".join(f"{a}: {c}" for a, c in o["labels"].items())
        lines.append(f"- {o['set']} {o['uid']} ({o['scenario']}): majority {o['majority']} ({said})")
    lines += ["", f"Intervals: {report['interval_method']}.", ""]
    return "\n".join(lines)


__all__ = ["MAJORITY", "NO_VARIATION", "agreement", "cohen_kappa", "krippendorff_alpha", "markdown"]
