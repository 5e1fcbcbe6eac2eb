"""Length-controlled pairwise accuracy, for any release (results.json ``length_control``).

The length difference of a pair is ``len(chosen) - len(rejected)`` in characters (Unicode code points of the
answer strings; not the RM's tokens, which differ between RMs and would make two RMs' figures incomparable).

- ``bins``: accuracy in fixed bins of that difference, each with its Clopper-Pearson interval.
- ``length_neutral``: the expected outcome at a length difference of zero, from a logistic regression of the
  outcome on ``sign(d) * log(1 + |d|)`` of the difference ``d``, penalised as Firth (1993) does (Jeffreys
  prior). Why this and not matched pairs:
  a scorer that goes by length alone separates outcome and length perfectly, where the plain maximum-likelihood
  fit does not exist (its slope runs to infinity); Firth's estimate always exists and is finite, and it uses
  every pair, where matching pairs of near-equal length would keep only the few that have them. Its 95%
  interval is the percentile bootstrap over pairs (seeded; ``--bootstrap`` draws, at most 2000).
Per goal and over all pairwise items; an outcome of 0.5 (a tie under ``--ties half``) enters as a fraction.
The figure is read at exactly zero difference, where a scorer going by length alone ties: under ``--ties strict``
its few equal-length pairs count wrong and pull the figure below 50 (on a built release of 450 pairs, 3 such
pairs: 16.2% [7.3, 42.3] strict, 45.1% [36.3, 52.7] half); that is the estimand under strict ties, not a fault.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import expit

from rmb_build.core.intervals import ALPHA, mean_interval
from rmb_build.core.items import Item, PairwiseItem
from rmb_build.core.taxonomy import PAIRWISE_SET, parse_scenario_id

UNIT = "characters (Unicode code points) of the answer: chosen minus rejected"
ESTIMATOR = (
    "Firth-penalised logistic regression of the outcome on sign(d)*log(1+|d|) of the length difference d, read "
    "at d = 0; "
    "it exists even where length separates the outcomes perfectly (a length-only scorer), where plain maximum "
    "likelihood does not; 95% percentile bootstrap over pairs (at most 2000 draws). A tie counts as --ties says: "
    "under strict, wrong, so a scorer that ties where the lengths are equal (one going by length alone) reads "
    "below 50 at d = 0, where --ties half puts it at chance"
)
EDGES = (-1000, -300, -100, 0, 1, 100, 300, 1000)  # bins: below -1000, [-1000, -300), ..., [1, 100), ..., 1000 up
MIN_PAIRS = 10
MAX_STEP = 5.0  # Newton steps capped, as logistf does, so that a near-separated fit converges
MAX_ITER = 500
TOL = 1e-7
HALVINGS = 30
CHUNK = 256
MAX_DRAWS = 2000  # a percentile bootstrap's usual count; each draw is a fit


def _label(lo: float, hi: float) -> str:
    if lo == -np.inf:
        return f"< {hi:g}"
    if hi == np.inf:
        return f">= {lo:g}"
    return "0" if (lo, hi) == (0, 1) else f"[{lo:g}, {hi:g})"


def signed_log(x: np.ndarray) -> np.ndarray:
    """The covariate of the fit: ``sign(d) * log(1 + |d|)``, 0 at 0, so that a few very long answers do not set
    the slope alone and a gap of a few characters around 0 is not a cliff."""
    return np.sign(x) * np.log1p(np.abs(x))


def _penalised(x: np.ndarray, y: np.ndarray, w: np.ndarray, b0: np.ndarray, b1: np.ndarray):
    """Firth's penalised log-likelihood of each fit, its score (gradient) and information matrix."""
    z = b0[:, None] + b1[:, None] * x
    p = expit(z)
    v = p * (1.0 - p)
    wv = w * v
    a, b, c = wv.sum(1), (wv * x).sum(1), (wv * x * x).sum(1)  # information [[a, b], [b, c]]
    det = np.maximum(a * c - b * b, 1e-300)
    loglik = (w * (y * z - np.logaddexp(0.0, z))).sum(1)
    h = v * (c[:, None] - 2 * b[:, None] * x + a[:, None] * x * x) / det[:, None]  # one row's hat value
    r = w * (y - p + h * (0.5 - p))
    return loglik + 0.5 * np.log(det), (r.sum(1), (r * x).sum(1)), (a, b, c, det)


def firth_logistic(
    x: np.ndarray, y: np.ndarray, weights: np.ndarray, start: tuple[float, float] = (0.0, 0.0)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Firth-penalised fits of ``y ~ 1 + x``, one per row of ``weights`` (frequency weights: a bootstrap
    resample's counts), by Newton steps from ``start`` that are capped and halved until the penalised
    likelihood rises; returns (intercepts, slopes, converged)."""
    w = np.atleast_2d(weights).astype(float)
    b0 = np.full(len(w), float(start[0]))
    b1 = np.full(len(w), float(start[1]))
    done = np.zeros(len(w), dtype=bool)
    obj, (u0, u1), (a, b, c, det) = _penalised(x, y, w, b0, b1)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(MAX_ITER):
            # a singular information matrix (one resample's pairs all alike) makes an infinite step: that fit
            # stops where it is, never at NaN, and counts as not converged
            d0, d1 = (c * u0 - b * u1) / det, (a * u1 - b * u0) / det
            stuck = ~(np.isfinite(d0) & np.isfinite(d1))
            d0, d1 = np.where(stuck, 0.0, d0), np.where(stuck, 0.0, d1)
            big = np.maximum(np.abs(d0), np.abs(d1))
            step = np.where(done | stuck, 0.0, np.minimum(1.0, MAX_STEP / np.maximum(big, 1e-300)))
            for _ in range(HALVINGS):
                new = _penalised(x, y, w, b0 + step * d0, b1 + step * d1)
                worse = (new[0] < obj - 1e-12) & (step > 0)
                if not worse.any():
                    break
                step = np.where(worse, step / 2, step)
            moved = np.maximum(np.abs(step * d0), np.abs(step * d1))
            b0, b1 = b0 + step * d0, b1 + step * d1
            obj, (u0, u1), (a, b, c, det) = new
            done |= (moved < TOL) & ~stuck
            if (done | stuck).all():
                break
    # a resample whose pairs share one length difference has no slope to fit: no fit, whatever the steps did
    mean_x = (w * x).sum(1) / np.maximum(w.sum(1), 1e-300)
    spread = (w * (x - mean_x[:, None]) ** 2).sum(1) > 0
    return b0, b1, done & spread & np.isfinite(b0) & np.isfinite(b1)


def _bins(x: np.ndarray, y: np.ndarray, draws: int, seed: int, stratum: str) -> list[dict[str, Any]]:
    edges = (-np.inf, *EDGES, np.inf)
    out = []
    for lo, hi in zip(edges, edges[1:]):
        sel = (x >= lo) & (x < hi)
        row: dict[str, Any] = {"label": _label(lo, hi), "range": [_num(lo), _num(hi)], "n": int(sel.sum())}
        if sel.any():
            row["accuracy"] = float(y[sel].mean())
            row["ci95"] = mean_interval(y[sel], draws, seed, f"{stratum}/{row['label']}")
        else:
            row["accuracy"] = row["ci95"] = None
        out.append(row)
    return out


def _num(v: float) -> float | None:
    return None if np.isinf(v) else float(v)


def group_figures(x: np.ndarray, y: np.ndarray, draws: int, seed: int, stratum: str) -> dict[str, Any]:
    """One group's plain accuracy, its length-neutral accuracy with interval, and its bins."""
    n = len(y)
    out: dict[str, Any] = {
        "n": n,
        "accuracy": float(y.mean()),
        "ci95": mean_interval(y, draws, seed, f"{stratum}/plain"),
        "chosen_longer_share": float((x > 0).mean()),
        "length_neutral": None,
        "length_neutral_ci95": None,
        "bins": _bins(x, y, draws, seed, stratum),
    }
    if n < MIN_PAIRS:
        return {**out, "length_neutral_reason": f"{n} pairs, fewer than {MIN_PAIRS}"}
    if np.all(x == x[0]):
        return {**out, "length_neutral_reason": "every pair has the same length difference"}
    xs = signed_log(x)
    b0, b1, ok = firth_logistic(xs, y, np.ones((1, n)))
    if not ok[0]:
        return {**out, "length_neutral_reason": f"the penalised fit did not converge in {MAX_ITER} steps"}
    rng = np.random.default_rng([seed, n, 4242])
    boot, conv = [], []
    draws = min(draws, MAX_DRAWS)
    for start in range(0, draws, CHUNK):  # chunks keep memory at CHUNK x pairs
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=min(CHUNK, draws - start))
        b, _, c = firth_logistic(xs, y, counts, start=(b0[0], b1[0]))  # each draw starts from the estimate
        boot.append(b)
        conv.append(c)
    ok_draws = np.concatenate(conv)
    if ok_draws.sum() < draws / 2:  # an interval from the few resamples that fit would be a guess
        return {
            **out,
            "length_neutral_reason": f"only {int(ok_draws.sum())} of {draws} bootstrap fits converged",
            "bootstrap": {"draws": draws, "converged": int(ok_draws.sum())},
        }
    values = expit(np.concatenate(boot)[ok_draws])
    out["length_neutral"] = float(expit(b0[0]))
    out["length_neutral_ci95"] = [float(np.quantile(values, ALPHA / 2)), float(np.quantile(values, 1 - ALPHA / 2))]
    out["bootstrap"] = {"draws": draws, "converged": int(ok_draws.sum())}
    return out


def length_control(
    items: Sequence[Item], predictions: Sequence[Mapping[str, Any]], draws: int, seed: int
) -> dict[str, Any]:
    """results.json's ``length_control`` over the pairwise predictions (matched to ``items`` by uid)."""
    by_uid = {it.uid: it for it in items if isinstance(it, PairwiseItem)}
    rows = [(p, by_uid[p["uid"]]) for p in predictions if p["set"] == PAIRWISE_SET and p["uid"] in by_uid]
    out: dict[str, Any] = {"unit": UNIT, "estimator": ESTIMATOR, "goals": {}, "overall": None}
    if not rows:
        return out
    x = np.array([len(it.chosen.answer) - len(it.rejected.answer) for _, it in rows], dtype=float)
    y = np.array([float(p["outcome"]) for p, _ in rows])
    goals = np.array([parse_scenario_id(p["scenario"]).goal for p, _ in rows])
    for g in dict.fromkeys(goals):
        sel = goals == g
        out["goals"][g] = group_figures(x[sel], y[sel], draws, seed, f"length/{g}")
    out["overall"] = group_figures(x, y, draws, seed, "length/overall")
    return out


__all__ = ["ESTIMATOR", "UNIT", "firth_logistic", "group_figures", "length_control"]
