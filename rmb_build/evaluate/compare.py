"""Paired comparison of two evaluation folders: A - B on every figure, with a 95% interval and a p-value.

Only like with like. Each results.json records the release it scored (``release_info``: name and a sha256
over its items). Same sha256: items are matched by ``(set, uid)`` (repeated keys pair up in file order).
Different releases, or a results.json without a sha256 (written before evaluate recorded it), are refused
with one line, unless ``shared_texts``: then items are matched on the texts both share (``text_sha256`` of
predictions.jsonl: the set, the turns' role and content, the answers), scenarios are A's, and the result's
``matching`` says how many items each side had and how many were matched.

Method. A figure over several scenarios and at least ``POOLED_FROM`` (100) items (``rmb_overall``, its cells, a
goal) gets ``core.intervals.pooled_difference``: a t interval and p from the items' differences, each scenario's
variance shrunk toward its goal's pooled one, and toward what its own items allow where the pool is under a third
of that, so that a scenario of one item counts with its goal's spread and a small unsure one beside a large sure
one with its own. The construction below,
conservative by design, kept a scenario of one item at a pseudo-item's full weight: on every RMB scenario with 1
to 4 items, two RMs of equal accuracy got a mean p of 0.70 and no rejection (docs/calibration-uncertainty.md).
Below that size, and for one scenario, the construction stays (exact McNemar for one scenario of 0/1 outcomes).

A figure is a weighted sum of per-scenario mean differences, F = sum_s w_s D_s (macro: w_s = 1/S;
micro: n_s/N; RMB's headline: the mean of four goal macros), with D_s = sum_i d_i / n_s and d_i = a_i - b_i
in {0, +-0.5, +-1}. Per scenario, the number of items with each non-zero value v of d gets a gamma posterior
draw G_v ~ Gamma(count) (a Poisson model: conservative for counts bounded by n_s), so that
B = sum_s (w_s / n_s) sum_v v G_v is a draw of F. As in Fay and Feuer's interval for weighted sums of
Poisson counts, one pseudo-item of the figure's largest item weight u = max_s w_s / n_s is added at the far
end of the range, on each side (E ~ Gamma(1), the same in both):

    L = B - u E,    U = B + u E

- the 95% interval is [lo, hi]: lo the 2.5% order statistic of L (the smallest L with at least 2.5% of L at
  or below it), hi the 97.5% one of U (the largest with at least 2.5% of U at or above it), clipped to the
  figure's range [-W, W], W = sum_s w_s;
- the two-sided p-value is ``p = min(1, 2 * min(P(L <= 0), P(U >= 0)))`` over the same draws,

so the interval excludes 0 exactly when p < 0.05. U > L on every draw, so no interval has zero width: where
A and B agree on every item of a group it is [-x, x] with x > 0, and p = 1. For one scenario of 0/1
outcomes, P(L <= 0) is the one-sided exact sign (McNemar) test on the items only A or only B got right, so p
is the exact McNemar p-value. Simulated coverage of the 95% interval (1,000 trials per case, the laws of
tests/evaluate/test_compare.py: independent, always disagreeing, nested, near the boundary, with ties): 0.965
to 1.0 for one scenario of 3, 5, 10 or 20 items, 0.956 to 1.0 for macros over 4 and 8 such scenarios; with 300
trials, 0.967 to 0.983 for macros over 20 or 40 scenarios of 1 to 3 items and 0.95 to 1.0 for macro and micro
over 30 scenarios of 1 to 20. Over many scenarios of many items the pseudo-item's weight vanishes and coverage
tends to the nominal 0.95 (0.933 and 0.970 at 49 scenarios of 65 items). The price is width where items are
few. A p of 0 means no draw reached 0: p < 1/draws.
"""

from __future__ import annotations

import json
import math
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypedDict, Unpack

import numpy as np

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.intervals import pooled_difference
from rmb_build.core.jsonl import read_jsonl_objects
from rmb_build.core.taxonomy import BON_SET, GOALS, PAIRWISE_SET, SETS, parse_scenario_id
from rmb_build.evaluate.metrics import goals_of

DEFAULT_RESAMPLES = 10_000  # Monte Carlo draws (the name predates this method)
ALPHA = 0.05
POOLED_FROM = 100  # items: from here a figure over several scenarios takes the pooled-variance interval
SMALL_SCENARIO = 5  # fewer shared items than this: the intervals stay valid but are wide
RMB_CELLS = tuple(f"{s}/{g}" for s in (PAIRWISE_SET, BON_SET) for g in GOALS)
METHOD = (
    "paired: over several scenarios and at least 100 items, a t interval and p from the item differences A-B, "
    "each scenario's variance shrunk toward its goal's pooled one; otherwise per scenario, gamma (Poisson) posterior draws of the "
    "counts of items by their difference A-B, "
    "plus one pseudo-item of the figure's largest item weight at the far end on each side (Fay-Feuer); "
    "95% interval = [2.5% quantile of the low draws, 97.5% quantile of the high draws], "
    "p = 2 x min(P(low <= 0), P(high >= 0)) from the same draws (for one scenario of 0/1 outcomes: "
    "the exact McNemar test)"
)
SHORT_SHA = 12


@dataclass(frozen=True)
class ReleaseId:
    """The release a results.json says it scored: its name and the sha256 over its items (None: not recorded)."""

    name: str
    sha256: str | None

    def label(self) -> str:
        return f"{self.name} (sha256 {self.sha256[:SHORT_SHA]})" if self.sha256 else f"{self.name} (no sha256 recorded)"


def release_id(results: Mapping[str, Any]) -> ReleaseId:
    """The release identity a results.json object records (``release_info`` from ``rmb evaluate``)."""
    info = results.get("release_info") or {}
    sha = info.get("sha256") if isinstance(info, dict) else None
    name = (info.get("name") if isinstance(info, dict) else None) or results.get("release") or "?"
    return ReleaseId(str(name), sha if isinstance(sha, str) and sha else None)


def _results(folder: str | Path) -> dict[str, Any] | None:
    """``folder/results.json`` as an object (None when absent or unreadable)."""
    try:
        r = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return r if isinstance(r, dict) else None


def check_same_release(dir_a: str | Path, dir_b: str | Path) -> ReleaseId:
    """The release A and B both scored; RMBError (one line naming both) when they differ or one is unknown."""
    ids = []
    for folder in (dir_a, dir_b):
        r = _results(folder)
        path = Path(folder) / "results.json"
        if r is None:
            raise InputError(
                str(path),
                "missing or unreadable, so the release it scored is unknown; "
                "add --shared-texts to compare on the texts both share",
            )
        rid = release_id(r)
        if rid.sha256 is None:
            raise InputError(
                str(path),
                "records no release sha256 (written before 'rmb evaluate' recorded it), so "
                "its items cannot be shown to be the other's; re-run 'rmb evaluate', or add "
                "--shared-texts to compare on the texts both share",
                field="release_info",
            )
        ids.append(rid)
    a, b = ids
    if a.sha256 != b.sha256:
        raise RMBError(
            f"A and B scored different releases: A {a.label()}, B {b.label()}; items cannot be paired by "
            "uid (add --shared-texts to compare on the texts both share)"
        )
    return a


def read_predictions(folder: str | Path, need: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The rows of ``folder/predictions.jsonl``; bad lines raise InputError naming file, line and field.

    ``need``: further fields every row must have (``text_sha256`` to match on shared texts).
    """
    path = Path(folder) / "predictions.jsonl"
    if not path.is_file():
        raise InputError(str(path), "missing: not an 'rmb evaluate' output folder")
    return [check_prediction(row, str(path), need, line=n) for n, row in read_jsonl_objects(path)]


class Where(TypedDict, total=False):
    """Where a row is, for an InputError: its line in a file or its index among items."""

    line: int
    item: str | int


def check_prediction(row: dict[str, Any], where: str, need: Sequence[str] = (), **at: Unpack[Where]) -> dict[str, Any]:
    """``row`` when it is a prediction (set, uid, scenario, an outcome from 0 to 1); InputError naming ``where``
    and ``at`` (``line=`` or ``item=``) and the field otherwise."""
    for field in ("set", "uid", "scenario", "outcome"):
        if field not in row:
            raise InputError(where, "missing", field=field, **at)
    for field in need:
        if field not in row:
            raise InputError(
                where,
                "missing (written before 'rmb evaluate' recorded item digests); re-run "
                "'rmb evaluate' to compare on shared texts",
                field=field,
                **at,
            )
    o = row["outcome"]
    if not isinstance(o, (int, float)) or isinstance(o, bool) or not 0 <= o <= 1:
        raise InputError(where, "expected a number from 0 to 1", field="outcome", **at)
    if row["set"] not in (PAIRWISE_SET, BON_SET):
        raise InputError(where, f"expected {PAIRWISE_SET!r} or {BON_SET!r}", field="set", **at)
    if not isinstance(row["scenario"], str) or not row["scenario"]:
        raise InputError(where, "expected a scenario id (a string)", field="scenario", **at)
    if isinstance(row["uid"], bool) or not isinstance(row["uid"], (str, int)):
        raise InputError(where, "expected a string or integer uid", field="uid", **at)
    return row


def _ties(folder: str | Path) -> str | None:
    """The tie rule an evaluation folder was scored with (None when its results.json is absent or unreadable)."""
    r = _results(folder)
    return r.get("ties") if r else None


def _protocol(folder: str | Path) -> str | None:
    """The harness protocol an evaluation folder was scored under (None where results.json records none)."""
    r = _results(folder)
    p = r.get("protocol") if r else None
    return p.get("name") if isinstance(p, dict) else None


def _uid_key(row: Mapping[str, Any]) -> tuple[str, str]:
    return row["set"], str(row["uid"])


def _text_key(row: Mapping[str, Any]) -> tuple[str, str]:
    return row["set"], str(row["text_sha256"])


def _matches(
    a: Sequence[dict], b: Sequence[dict], key: Callable[[Mapping[str, Any]], tuple]
) -> list[tuple[dict, dict]]:
    """(A's row, B's row) for every item both hold, matched by ``key`` (repeated keys pair up in file order)."""
    b_by_key: dict[tuple, list[dict]] = defaultdict(list)
    for row in b:
        b_by_key[key(row)].append(row)
    used: dict[tuple, int] = defaultdict(int)
    out = []
    for row in a:
        k = key(row)
        if used[k] < len(b_by_key.get(k, ())):
            out.append((row, b_by_key[k][used[k]]))
            used[k] += 1
    return out


# --- the interval -----------------------------------------------------------------------------------------------


def interval_and_p(
    observed: float, low: np.ndarray, high: np.ndarray | None = None, bound: float | None = None
) -> dict[str, Any]:
    """``{"diff", "ci95", "p"}`` from the low and high draws (see the module docstring); ``high`` defaults to
    ``low``; ``bound``: the figure's range [-bound, bound] the interval is clipped to."""
    lo_d = np.sort(np.asarray(low, dtype=float))
    hi_d = lo_d if high is None else np.sort(np.asarray(high, dtype=float))
    r = len(lo_d)
    # k = ceil(2.5% of r): lo > 0 iff fewer than k of L are <= 0 iff P(L <= 0) < 2.5% (and so for hi and U).
    # The epsilon absorbs float error in 0.025 * r (0.025 * 200 is 5.000000000000001).
    k = max(1, math.ceil(ALPHA / 2 * r - 1e-9))
    lo, hi = float(lo_d[k - 1]), float(hi_d[r - k])
    if bound is not None:  # clipping keeps each end's sign, so it keeps the agreement with p
        lo, hi = max(lo, -bound), min(hi, bound)
    below, above = np.count_nonzero(lo_d <= 0) / r, np.count_nonzero(hi_d >= 0) / r
    return {"diff": float(observed), "ci95": [lo, hi], "p": float(min(1.0, 2 * min(below, above)))}


def _rng(seed: int, stratum: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(stratum.encode("utf-8"))])


@dataclass
class Paired:
    """One scenario's paired outcomes and its draws of sum_v v G_v (see the module docstring)."""

    a: np.ndarray
    b: np.ndarray
    draws: np.ndarray
    pool: str = ""  # the scenarios whose variance it shares in a figure over several: its set and goal

    @property
    def n(self) -> int:
        return len(self.a)

    @classmethod
    def of(
        cls, a: Sequence[float], b: Sequence[float], draws: int, rng: np.random.Generator, pool: str = ""
    ) -> "Paired":
        xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        values, counts = np.unique(xa - xb, return_counts=True)
        keep = values != 0
        values, counts = values[keep], counts[keep]
        sums = rng.gamma(counts, size=(draws, len(counts))) @ values if len(values) else np.zeros(draws)
        return cls(xa, xb, sums, pool)


def figure(members: Sequence[Paired], weights: Sequence[float], pseudo: np.ndarray) -> dict[str, Any]:
    """``{"n", "a", "b", "diff", "ci95", "p"}`` of sum_s w_s (mean A_s - mean B_s); ``pseudo``: Gamma(1) draws.

    Several scenarios and at least ``POOLED_FROM`` items: the pooled variance (``core.intervals.pooled_difference``),
    which holds its 95% (or over-covers, at most 99%) where scenarios hold 1 to 4 items
    (docs/calibration-uncertainty.md). Otherwise the Monte Carlo construction of the
    module docstring (for one scenario of 0/1 outcomes, the exact McNemar p): conservative, where a t
    approximation on few items is not to be trusted.
    """
    u = [w / m.n for m, w in zip(members, weights)]
    a = sum(ui * float(m.a.sum()) for m, ui in zip(members, u))
    b = sum(ui * float(m.b.sum()) for m, ui in zip(members, u))
    if len(members) > 1 and sum(m.n for m in members) >= POOLED_FROM:
        test = pooled_difference([(w, m.a - m.b, m.pool) for m, w in zip(members, weights)])
        return {"n": sum(m.n for m in members), "a": a, "b": b, **test, "diff": a - b}
    base = np.sum([ui * m.draws for m, ui in zip(members, u)], axis=0)
    shift = max(u) * pseudo
    return {
        "n": sum(m.n for m in members),
        "a": a,
        "b": b,
        **interval_and_p(a - b, base - shift, base + shift, bound=float(sum(weights))),
    }


def difference(
    outcomes: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    weights: Mapping[str, float] | None = None,
    draws: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """The interval and p of sum_s w_s (mean A_s - mean B_s) over ``outcomes``: scenario -> (A's, B's outcomes),
    paired by position; ``weights`` default to a macro (1/S each)."""
    w = weights or {s: 1 / len(outcomes) for s in outcomes}
    members = [Paired.of(*outcomes[s], draws, _rng(seed, s)) for s in outcomes]
    return figure(members, [w[s] for s in outcomes], _rng(seed, "pseudo").gamma(1.0, size=draws))


# --- compare ----------------------------------------------------------------------------------------------------


def _group(paired: Mapping[str, Paired], members: list[str], pseudo: np.ndarray) -> dict[str, Any]:
    """Macro and micro comparisons of one group of scenarios."""
    ms = [paired[s] for s in members]
    total = sum(m.n for m in ms)
    return {
        "macro": figure(ms, [1 / len(ms)] * len(ms), pseudo),
        "micro": figure(ms, [m.n / total for m in ms], pseudo),
    }


def _rmb_overall(by_set: Mapping[str, dict[str, Paired]], pseudo: np.ndarray) -> dict[str, Any] | None:
    """RMB's headline: each cell a set's goal macro, and their plain mean."""
    cells = {
        f"{s}/{g}": [paired[x] for x in members]
        for s, paired in by_set.items()
        for g, members in goals_of(list(paired)).items()
    }
    cells = {c: cells[c] for c in RMB_CELLS if c in cells}
    if not cells:
        return None
    members = [m for ms in cells.values() for m in ms]
    weights = [1 / (len(cells) * len(ms)) for ms in cells.values() for _ in ms]
    out = figure(members, weights, pseudo)
    out["cells"] = {c: figure(ms, [1 / len(ms)] * len(ms), pseudo) for c, ms in cells.items()}
    out["missing"] = [c for c in RMB_CELLS if c not in cells]
    return out


def _match(dir_a: str | Path, dir_b: str | Path, shared_texts: bool) -> tuple[list, dict[str, Any], dict[str, Any]]:
    """(pairs, release identities, matching summary); refuses different releases unless ``shared_texts``."""
    ids = {side: release_id(_results(d) or {}) for side, d in (("a", dir_a), ("b", dir_b))}
    if not shared_texts:
        check_same_release(dir_a, dir_b)
    need = ("text_sha256",) if shared_texts else ()
    rows_a, rows_b = read_predictions(dir_a, need), read_predictions(dir_b, need)
    matches = _matches(rows_a, rows_b, _text_key if shared_texts else _uid_key)
    pairs = [(ra["set"], ra["scenario"], float(ra["outcome"]), float(rb["outcome"])) for ra, rb in matches]
    matching = {
        "by": "shared texts" if shared_texts else "set and uid",
        "a_items": len(rows_a),
        "b_items": len(rows_b),
        "matched": len(pairs),
    }
    if shared_texts:
        matching["scenario_differs"] = sum(ra["scenario"] != rb["scenario"] for ra, rb in matches)
    releases: dict[str, Any] = {side: {"name": r.name, "sha256": r.sha256} for side, r in ids.items()}
    releases["same"] = ids["a"].sha256 is not None and ids["a"].sha256 == ids["b"].sha256
    return pairs, releases, matching


def compare(
    dir_a: str | Path, dir_b: str | Path, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, shared_texts: bool = False
) -> dict[str, Any]:
    """Compare two evaluations of one release over their shared items (or, with ``shared_texts``, of any
    releases over the texts both share).

    Returns ``{"a", "b", "release": {"a", "b", "same"}, "matching": {"by", "a_items", "b_items", "matched",
    ...}, "interval": {"draws", "seed", "method"}, "bootstrap": {"resamples", "seed", "method"} (the same, under
    its earlier name), "rmb_overall": {"diff", "ci95", "p", "a", "b", "n", "cells": {cell: {...}}, "missing"},
    <set>: {"overall": {"macro": {...}, "micro": {...}}, "goals": {goal: {"macro", "micro"}}}}``; every figure
    is A - B. RMBError when the releases differ or are unknown and ``shared_texts`` is not set.
    """
    if resamples < 1:
        raise ValueError("the interval needs at least one draw")
    pairs, releases, matching = _match(dir_a, dir_b, shared_texts)
    result: dict[str, Any] = {
        "a": str(dir_a),
        "b": str(dir_b),
        "release": releases,
        "matching": matching,
        "interval": {"draws": resamples, "seed": seed, "method": METHOD},
        "bootstrap": {"resamples": resamples, "seed": seed, "method": METHOD},
    }
    figures = compare_pairs(pairs, resamples, seed)
    result["small_scenarios"] = figures.pop("small_scenarios")
    result["ties"] = {"a": _ties(dir_a), "b": _ties(dir_b)}
    result["protocol"] = {"a": _protocol(dir_a), "b": _protocol(dir_b)}
    result.update(figures)
    return result


def paired_by_uid(rows_a: Sequence[dict], rows_b: Sequence[dict]) -> list[tuple[str, str, float, float]]:
    """(set, scenario, A's outcome, B's outcome) for every item both prediction lists hold, matched by set and
    uid as ``compare`` matches them."""
    return [
        (ra["set"], ra["scenario"], float(ra["outcome"]), float(rb["outcome"]))
        for ra, rb in _matches(rows_a, rows_b, _uid_key)
    ]


def compare_pairs(
    pairs: Sequence[tuple[str, str, float, float]], resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """Every A - B figure of ``compare`` over paired outcomes (set, scenario, A's, B's): ``{"small_scenarios",
    <set>: {...}, "rmb_overall": {...}}`` (``rmb_overall`` absent where no item falls in RMB's cells).

    Estimand: each figure's difference of the two RMs' expected accuracies, each scenario's over its
    population of items (the scenarios fixed; the items a sample both RMs scored)."""
    by_scenario: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for set_name, scenario, a, b in pairs:
        by_scenario[(set_name, scenario)].append((a, b))
    result: dict[str, Any] = {"small_scenarios": sum(len(v) < SMALL_SCENARIO for v in by_scenario.values())}
    pseudo = _rng(seed, "pseudo").gamma(1.0, size=resamples)
    by_set: dict[str, dict[str, Paired]] = {}
    for set_name in SETS:
        scen = {sc: v for (s, sc), v in by_scenario.items() if s == set_name}
        if not scen:
            continue
        paired = by_set[set_name] = {
            sc: Paired.of(
                [a for a, _ in v],
                [b for _, b in v],
                resamples,
                _rng(seed, f"{set_name}/{sc}"),
                f"{set_name}/{parse_scenario_id(sc).goal}",
            )
            for sc, v in scen.items()
        }
        result[set_name] = {
            "overall": _group(paired, list(paired), pseudo),
            "goals": {g: _group(paired, m, pseudo) for g, m in goals_of(list(paired)).items()},
        }
    overall = _rmb_overall(by_set, pseudo)
    if overall is not None:
        result["rmb_overall"] = overall
    return result


# --- the table --------------------------------------------------------------------------------------------------


def _fmt_p(p: float, draws: int) -> str:
    return f"<{1 / draws:.4f}" if p == 0 else f"{p:.4f}"


def _line(label: str, kind: str, r: dict[str, Any], draws: int) -> str:
    return (
        f"{label:32s} {kind:5s} {r['n']:6d} {100 * r['a']:6.1f} {100 * r['b']:6.1f} {100 * r['diff']:+7.1f} "
        f"[{100 * r['ci95'][0]:+6.1f}, {100 * r['ci95'][1]:+6.1f}] {_fmt_p(r['p'], draws):>7s}"
    )


def _short(rel: Mapping[str, Any]) -> str:
    return ReleaseId(rel.get("name") or "?", rel.get("sha256")).label()


def _matching_lines(result: dict[str, Any]) -> list[str]:
    """What was paired with what: the releases, and for shared texts how many items each side had."""
    rel, m = result.get("release") or {}, result.get("matching") or {}
    if not rel or not m:
        return []
    if m["by"] != "shared texts":
        return [
            f"Release: {_short(rel['a'])}, scored by both; {m['matched']} items matched by set and uid "
            f"(A had {m['a_items']}, B {m['b_items']})."
        ]
    same = "the same release" if rel.get("same") else "DIFFERENT releases"
    moved = m.get("scenario_differs")
    moved = f"; {moved} of them in another scenario in B (grouped by A's)" if moved else ""
    return [
        f"Releases: A {_short(rel['a'])}, B {_short(rel['b'])}: {same}.",
        f"Compared on the texts both share (set, turns' role and content, answers): A had {m['a_items']} items, "
        f"B {m['b_items']}; {m['matched']} matched{moved}.",
    ]


def render_table(result: dict[str, Any]) -> str:
    """A plain-text table of the comparison, with its releases, matching, method and number of draws."""
    meta = result["interval"]
    draws = meta["draws"]
    lines = [
        f"A = {result['a']}",
        f"B = {result['b']}",
        *_matching_lines(result),
        f"Method: {meta.get('method', METHOD)}; {draws} draws, seed {meta['seed']}.",
        "macro = mean of scenario accuracies; micro = mean over items. Accuracies and A-B in points.",
    ]
    ties = result.get("ties") or {}
    if ties.get("a") != ties.get("b"):
        lines.append(
            f"Note: A counts pairwise ties as {ties.get('a')!r}, B as {ties.get('b')!r}: "
            "the pairwise figures follow different rules."
        )
    protocols = result.get("protocol") or {}
    if protocols.get("a") != protocols.get("b"):
        lines.append(
            f"Note: A was scored under protocol {protocols.get('a')!r}, B under {protocols.get('b')!r}: "
            "their texts were prepared by different harnesses (length cut, special tokens, roles)."
        )
    if result.get("small_scenarios"):
        lines.append(
            f"Note: {result['small_scenarios']} scenarios have fewer than {SMALL_SCENARIO} shared items; "
            "the intervals stay valid there but are wide."
        )
    lines += ["", f"{'figure':32s} {'kind':5s} {'n':>6s} {'A':>6s} {'B':>6s} {'A-B':>7s} {'95% CI':>17s} {'p':>7s}"]
    overall = result.get("rmb_overall")
    if overall:
        lines.append(_line("RMB overall (mean of cells)", "macro", overall, draws))
        lines += [_line(f"  {cell}", "macro", r, draws) for cell, r in overall["cells"].items()]
        if overall["missing"]:
            lines.append(f"  (no shared items for {', '.join(overall['missing'])}: the mean is over the others)")
    for set_name in SETS:
        if set_name not in result:
            continue
        entry = result[set_name]
        for name, r in [("overall", entry["overall"]), *entry["goals"].items()]:
            for kind in ("macro", "micro"):
                lines.append(_line(f"{set_name}/{name}", kind, r[kind], draws))
    return "\n".join(lines)
