"""``rmb compare``: one set of paired draws gives every interval and p-value, so they always agree; intervals never
collapse and cover; results of different releases are never paired by uid."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from rmb_build.cli import main
from rmb_build.core.errors import InputError, RMBError
from rmb_build.evaluate.compare import compare, difference, interval_and_p, render_table

SHA_A, SHA_B = "a" * 64, "b" * 64


def _excludes_zero(ci):
    return ci[0] > 0 or ci[1] < 0


@pytest.mark.parametrize("resamples", [1, 2, 7, 40, 199, 200, 201, 1000])
@pytest.mark.parametrize("side", [1, -1])
def test_interval_excludes_zero_exactly_when_p_below_005_at_the_boundary(resamples, side):
    """Draws with 0..2x(2.5% of draws) values at or beyond 0 (some exactly 0)."""
    for k in range(0, min(resamples, int(0.05 * resamples) + 3) + 1):
        for at_zero in {0, k // 2, k}:
            boot = (
                np.concatenate([np.full(k - at_zero, -0.1), np.zeros(at_zero), np.linspace(0.01, 0.3, resamples - k)])
                * side
            )
            r = interval_and_p(float(np.mean(boot)), boot)
            assert _excludes_zero(r["ci95"]) == (r["p"] < 0.05), (resamples, k, at_zero, r)
            at_or_beyond, at_or_before = k, resamples - k + at_zero  # draws on 0's far side, on its near side
            assert r["p"] == pytest.approx(min(1.0, 2 * min(at_or_beyond, at_or_before) / resamples))
            assert r["ci95"][0] <= r["ci95"][1]


def test_low_and_high_draws_agree_with_p_when_they_differ():
    rng = np.random.default_rng(0)
    for _ in range(300):
        base, shift = rng.normal(rng.normal(0, 0.1), 0.05, 400), 0.05 * rng.gamma(1.0, size=400)
        r = interval_and_p(float(base.mean()), base - shift, base + shift, bound=1.0)
        assert _excludes_zero(r["ci95"]) == (r["p"] < 0.05) and r["ci95"][0] < r["ci95"][1]


@pytest.mark.parametrize("n", [1, 2, 3, 10, 200])
def test_an_all_agreeing_group_gets_a_nonzero_interval_around_0_and_p_1(n):
    for outcomes in ([1.0] * n, [0.0] * n, [0.5, 1.0, 0.0][:n] * (n // 3 + 1)):
        one = difference({"S": (outcomes, outcomes)}, draws=1000)
        macro = difference({f"S{k}": (outcomes, outcomes) for k in range(4)}, draws=1000)
        for r in (one, macro):
            lo, hi = r["ci95"]
            assert lo < 0 < hi and r["p"] == 1.0 and r["diff"] == 0.0
    assert difference({"S": ([1.0] * 20, [1.0] * 20)})["ci95"][1] == pytest.approx(0.184, abs=0.01)  # ~ 3.7/n


def _sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign (McNemar) test: 2 x the smaller tail of Binomial(wins + losses, 1/2)."""
    m = wins + losses
    tail = lambda k: sum(math.comb(m, j) for j in range(k, m + 1)) / 2**m  # noqa: E731  P(X >= k)
    return min(1.0, 2 * min(tail(wins), tail(losses)))


@pytest.mark.parametrize("wins, losses, ties", [(0, 0, 5), (3, 0, 0), (5, 0, 2), (6, 1, 3), (9, 2, 9), (12, 3, 0)])
def test_one_scenario_of_0_1_outcomes_gives_the_exact_mcnemar_p(wins, losses, ties):
    a = [1.0] * wins + [0.0] * losses + [1.0] * ties
    b = [0.0] * wins + [1.0] * losses + [1.0] * ties
    assert difference({"S": (a, b)}, draws=40_000, seed=1)["p"] == pytest.approx(_sign_test(wins, losses), abs=0.01)


# --- simulated coverage ----------------------------------------------------------------------------------------

# Joint laws of (A's outcome, B's outcome) per item: {(a, b): probability}; ties count half.
LAWS = {
    "zero, independent": {(1, 1): 0.36, (1, 0): 0.24, (0, 1): 0.24, (0, 0): 0.16},
    "zero, always disagree": {(1, 0): 0.5, (0, 1): 0.5},
    "zero, with ties": {(1, 0.5): 0.2, (0.5, 1): 0.2, (1, 1): 0.3, (0, 0.5): 0.1, (0.5, 0): 0.1, (0, 0): 0.1},
    "+0.3, independent": {(1, 1): 0.4, (1, 0): 0.4, (0, 1): 0.1, (0, 0): 0.1},
    "+0.6, A right whenever B is": {(1, 1): 0.3, (1, 0): 0.6, (0, 0): 0.1},
    "-0.9, near the boundary": {(0, 1): 0.9, (0, 0): 0.1},
    "+0.35, with ties": {(1, 0.5): 0.3, (1, 0): 0.2, (0.5, 0.5): 0.2, (0, 0.5): 0.1, (1, 1): 0.2},
}


def _truth(law):
    return sum(p * (a - b) for (a, b), p in law.items())


def _draw(law, n, rng):
    pairs = list(law)
    idx = rng.choice(len(pairs), size=n, p=list(law.values()))
    return [float(pairs[i][0]) for i in idx], [float(pairs[i][1]) for i in idx]


def _coverage(laws, n, trials, rng):
    truth = float(np.mean([_truth(law) for law in laws]))
    hits = 0
    for t in range(trials):
        outcomes = {f"S{k}": _draw(law, n, rng) for k, law in enumerate(laws)}
        lo, hi = difference(outcomes, draws=400, seed=t)["ci95"]
        hits += lo - 1e-12 <= truth <= hi + 1e-12
    return hits / trials


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_the_difference_interval_covers_at_least_93_percent_in_simulation():
    """Seeded: one scenario of each law, and macros over four scenarios of different laws, n = 3..20 items each
    (true differences 0 and not). 200 trials per case; 1,000-trial figures are in compare's module docstring."""
    start = time.monotonic()
    rng = np.random.default_rng(2024)
    names = list(LAWS)
    macros = {
        "macro, true 0": [LAWS[k] for k in names[:3]] + [LAWS[names[0]]],
        "macro, true +0.23": [LAWS[k] for k in names[3:]],
        "macro, mixed": [LAWS[k] for k in names[1:5]],
    }
    cases = {**{name: [law] for name, law in LAWS.items()}, **macros}
    coverage = {(name, n): _coverage(laws, n, 200, rng) for name, laws in cases.items() for n in (3, 5, 10, 20)}
    low = {k: v for k, v in coverage.items() if v < 0.93}
    assert not low, low
    assert time.monotonic() - start < 60


# --- compare on evaluation folders -----------------------------------------------------------------------------


def _write(
    folder: Path,
    outcomes: dict[tuple[str, str], list[float]],
    sha: str | None = SHA_A,
    name: str = "rel",
    texts: str = "",
) -> Path:
    folder.mkdir(parents=True)
    rows = [
        {"set": s, "uid": f"{sc}#{i}", "scenario": sc, "text_sha256": f"{texts}{s}{sc}#{i}", "outcome": o}
        for (s, sc), os_ in outcomes.items()
        for i, o in enumerate(os_)
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    info = {"name": name} if sha is None else {"name": name, "sha256": sha}
    results = {"rm": "x", "release": name, "ties": "strict", "release_info": info}
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def _figures(result):
    yield "rmb_overall", result["rmb_overall"]
    for cell, r in result["rmb_overall"]["cells"].items():
        yield cell, r
    for set_name in ("pairwise", "bon"):
        for name, g in [("overall", result[set_name]["overall"]), *result[set_name]["goals"].items()]:
            for kind in ("macro", "micro"):
                yield f"{set_name}/{name}/{kind}", g[kind]


def test_compare_interval_and_p_agree_on_constructed_cases_around_the_boundary(tmp_path):
    """A beats B on ``wins`` of 30 items per scenario (B never beats A): from no evidence to strong."""
    scenarios = [
        ("pairwise", "Helpfulness/Chat/Discussion"),
        ("pairwise", "Harmlessness/S6"),
        ("bon", "Helpfulness/Code/Data Management"),
        ("bon", "Harmlessness/multi"),
    ]
    verdicts = set()
    for wins in range(0, 7):
        b = {k: [1.0] * 10 + [0.0] * 20 for k in scenarios}
        a = {k: [1.0] * 10 + [1.0] * wins + [0.0] * (20 - wins) for k in scenarios}
        result = compare(_write(tmp_path / f"a{wins}", a), _write(tmp_path / f"b{wins}", b), resamples=400, seed=1)
        for name, r in _figures(result):
            assert _excludes_zero(r["ci95"]) == (r["p"] < 0.05), (wins, name, r)
            assert r["ci95"][0] < r["diff"] <= r["ci95"][1] + 1e-12 or wins == 0, (wins, name, r)
            assert r["ci95"][0] < r["ci95"][1]
            verdicts.add(r["p"] < 0.05)
        assert result["rmb_overall"]["diff"] == pytest.approx(wins / 30)
        assert result["pairwise"]["overall"]["macro"]["diff"] == pytest.approx(wins / 30)
    assert verdicts == {True, False}  # the cases straddle the boundary


def test_compare_reports_rmb_overall_and_labels_macro_micro(tmp_path, capsys):
    a = {
        ("pairwise", "Helpfulness/Chat/Discussion"): [1, 1, 1, 0],
        ("pairwise", "Harmlessness/S6"): [1, 0],
        ("bon", "Helpfulness/Chat/Discussion"): [1, 0, 0],
    }
    b = {
        ("pairwise", "Helpfulness/Chat/Discussion"): [1, 0, 0, 0],
        ("pairwise", "Harmlessness/S6"): [1, 1],
        ("bon", "Helpfulness/Chat/Discussion"): [0, 0, 0],
    }
    da, db = _write(tmp_path / "a", a), _write(tmp_path / "b", b)
    result = compare(da, db, resamples=300)
    ov = result["rmb_overall"]
    # Cells: pairwise help 0.75-0.25, pairwise harm 0.5-1.0, bon help 1/3-0; bon harm has no items.
    assert ov["cells"]["pairwise/Helpfulness"]["diff"] == pytest.approx(0.5)
    assert ov["cells"]["pairwise/Harmlessness"]["diff"] == pytest.approx(-0.5)
    assert ov["missing"] == ["bon/Harmlessness"]
    assert ov["diff"] == pytest.approx((0.5 - 0.5 + 1 / 3) / 3) and len(ov["ci95"]) == 2 and 0 <= ov["p"] <= 1
    assert result["pairwise"]["overall"]["macro"]["diff"] == pytest.approx((0.75 + 0.5) / 2 - (0.25 + 1.0) / 2)
    assert result["pairwise"]["overall"]["micro"]["diff"] == pytest.approx(4 / 6 - 3 / 6)
    assert result["interval"]["draws"] == 300 and "Fay-Feuer" in result["interval"]["method"]
    assert result["matching"] == {"by": "set and uid", "a_items": 9, "b_items": 9, "matched": 9}
    assert main(["compare", str(da), str(db), "--resamples", "300"]) == 0
    out = capsys.readouterr().out
    assert "300 draws" in out and "p = 2 x min(P(low <= 0), P(high >= 0))" in out
    assert f"Release: rel (sha256 {SHA_A[:12]}), scored by both; 9 items matched by set and uid" in out
    assert "RMB overall" in out and " macro " in out and " micro " in out
    assert out == render_table(result) + "\n"


def test_compare_is_seeded(tmp_path):
    a = {("pairwise", "Harmlessness/S1"): [1, 0, 1, 1, 0, 1]}
    b = {("pairwise", "Harmlessness/S1"): [0, 0, 1, 0, 1, 0]}
    da, db = _write(tmp_path / "a", a), _write(tmp_path / "b", b)
    assert compare(da, db, resamples=200, seed=3) == compare(da, db, resamples=200, seed=3)
    assert (
        compare(da, db, resamples=200, seed=3)["rmb_overall"] != compare(da, db, resamples=200, seed=4)["rmb_overall"]
    )


# --- only like with like ---------------------------------------------------------------------------------------

ITEMS = {("pairwise", "Helpfulness/Chat/Discussion"): [1, 0, 1, 1], ("pairwise", "Harmlessness/S6"): [1, 0]}


def test_different_releases_are_refused_in_one_line_naming_both(tmp_path, capsys):
    da = _write(tmp_path / "a", ITEMS, SHA_A, "rmb-sample")
    db = _write(tmp_path / "b", ITEMS, SHA_B, "demo")
    with pytest.raises(RMBError, match="different releases"):
        compare(da, db)
    assert main(["compare", str(da), str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--shared-texts" in err
    assert f"A rmb-sample (sha256 {SHA_A[:12]}), B demo (sha256 {SHA_B[:12]})" in err


def test_a_results_json_without_a_release_sha_is_refused_saying_why(tmp_path, capsys):
    da = _write(tmp_path / "a", ITEMS)
    db = _write(tmp_path / "b", ITEMS, sha=None)
    with pytest.raises(InputError, match="records no release sha256"):
        compare(da, db)
    assert main(["compare", str(da), str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(db / "results.json") in err and "re-run 'rmb evaluate'" in err
    (db / "results.json").unlink()
    assert main(["compare", str(da), str(db)]) == 2
    assert "missing or unreadable, so the release it scored is unknown" in capsys.readouterr().err
    assert main(["compare", str(da), str(db), "--shared-texts", "--resamples", "50"]) == 0


def test_shared_texts_match_on_texts_and_say_how_many(tmp_path, capsys):
    """B's release renumbers the items and holds two texts A's lacks: uids would pair the wrong items."""
    da = _write(tmp_path / "a", ITEMS, SHA_A, "rmb-sample")
    db = tmp_path / "b"
    db.mkdir()
    rows_a = [json.loads(x) for x in (da / "predictions.jsonl").read_text().splitlines()]
    rows_b = [{**r, "uid": f"new{i}", "outcome": 1 - r["outcome"]} for i, r in enumerate(reversed(rows_a))]
    rows_b[0]["scenario"] = "Harmlessness/S1"  # the same text filed elsewhere in B's release
    rows_b += [{"set": "pairwise", "uid": "x", "scenario": "Harmlessness/S6", "text_sha256": "other", "outcome": 1}] * 2
    (db / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows_b))
    (db / "results.json").write_text(
        json.dumps({"rm": "y", "release": "demo", "ties": "strict", "release_info": {"name": "demo", "sha256": SHA_B}})
    )
    result = compare(da, db, resamples=200, shared_texts=True)
    assert result["matching"] == {"by": "shared texts", "a_items": 6, "b_items": 8, "matched": 6, "scenario_differs": 1}
    assert result["release"] == {
        "a": {"name": "rmb-sample", "sha256": SHA_A},
        "b": {"name": "demo", "sha256": SHA_B},
        "same": False,
    }
    # Every matched item is A's outcome against its own complement: A - B = 2 x mean(A) - 1 per scenario.
    assert result["pairwise"]["overall"]["micro"]["diff"] == pytest.approx(2 * 4 / 6 - 1)
    assert (
        main(["compare", str(da), str(db), "--shared-texts", "--resamples", "200", "--json", str(tmp_path / "c.json")])
        == 0
    )
    out = capsys.readouterr().out
    assert f"Releases: A rmb-sample (sha256 {SHA_A[:12]}), B demo (sha256 {SHA_B[:12]}): DIFFERENT releases." in out
    assert (
        "Compared on the texts both share (set, turns' role and content, answers): A had 6 items, B 8; 6 matched; "
        "1 of them in another scenario in B (grouped by A's)." in out
    )
    assert json.loads((tmp_path / "c.json").read_text())["matching"]["matched"] == 6


def test_shared_texts_need_item_digests(tmp_path, capsys):
    da, db = _write(tmp_path / "a", ITEMS), _write(tmp_path / "b", ITEMS, SHA_B)
    rows = [json.loads(x) for x in (db / "predictions.jsonl").read_text().splitlines()]
    rows[1].pop("text_sha256")
    (db / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["compare", str(da), str(db), "--shared-texts"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "line 2: field 'text_sha256': missing" in err


def test_evaluations_of_two_real_releases_pair_only_their_shared_texts(tmp_path, capsys):
    """The issue's case: two releases whose uids collide over different texts; evaluate writes the digests."""
    from rmb_build.core.items import Answer, PairwiseItem, Turn
    from rmb_build.release import write_release
    from rmb_build.release.read import Release

    def release(name, items):
        rel = Release(name=name, root=None)
        for uid, q, scenario in items:
            rel.add(
                PairwiseItem(
                    uid, (Turn("user", q, "en"),), Answer("m1", f"A long answer to {q}"), Answer("m2", "No."), scenario
                )
            )
        write_release(rel, tmp_path / name)
        return tmp_path / name

    shared = [(str(i), f"Question {i}?", "Helpfulness/Chat/Discussion") for i in range(4)]
    one = release("one", shared + [("4", "Only in one?", "Harmlessness/S6")])
    two = release(
        "two",
        [("0", "Other question?", "Harmlessness/S6")]
        + [(str(int(u) + 1), q, "Harmlessness/S1" if u == "0" else s) for u, q, s in shared],
    )
    for rel, out in ((one, "a"), (two, "b")):
        assert (
            main(
                [
                    "evaluate",
                    "--release",
                    str(rel),
                    "--rm",
                    "baseline:length",
                    "--out",
                    str(tmp_path / out),
                    "--cache",
                    str(tmp_path / "cache"),
                    "--bootstrap",
                    "20",
                    "--no-progress",
                ]
            )
            == 0
        )
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "A and B scored different releases: A one (sha256 " in err and ", B two (sha256 " in err
    result = compare(tmp_path / "a", tmp_path / "b", resamples=100, shared_texts=True)
    assert result["matching"] == {"by": "shared texts", "a_items": 5, "b_items": 5, "matched": 4, "scenario_differs": 1}
    assert result["pairwise"]["overall"]["micro"]["n"] == 4 and result["pairwise"]["overall"]["micro"]["diff"] == 0


@pytest.mark.slow  # 30 compares of two evaluations of 98 scenarios: over 4 s under load
def test_equal_rms_on_scenarios_of_1_to_4_items_get_a_p_value_near_uniform(tmp_path):
    """Two RMs of equal accuracy on every RMB scenario of both sets, 1 to 4 items each, sharing half of their
    items' luck (as RMs share easy and hard items): rmb_overall's p is not pinned near 1 (the Monte Carlo
    construction alone, on 9435483: mean p 0.70, no rejection in 30) and rejects rarely."""
    from uncertainty_helpers import tiny_release

    rng = np.random.default_rng(8)
    release = tiny_release(rng, 1, 4)
    p_values = []
    for k in range(30):
        a, b = {}, {}
        for st, sc, n, theta in release:
            luck_a = rng.random(n)
            luck_b = np.where(rng.random(n) < 0.5, luck_a, rng.random(n))
            a[(st, sc)], b[(st, sc)] = (luck_a < theta).astype(float).tolist(), (luck_b < theta).astype(float).tolist()
        result = compare(_write(tmp_path / f"a{k}", a), _write(tmp_path / f"b{k}", b), resamples=2000, seed=k)
        p_values.append(result["rmb_overall"]["p"])
    assert sum(p < 0.05 for p in p_values) <= 4
    assert 0.35 <= float(np.mean(p_values)) <= 0.65  # uniform: 0.5, SD of a mean of 30 about 0.053
