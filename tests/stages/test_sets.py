"""build_sets on small hand-made judged answers: margins, safety, identical texts, BoN shape, stable uids."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from rmb_build.core.items import Turn
from rmb_build.core.records import GuardLabel, JudgeScore, Query, Response, query_id
from rmb_build.core.text import identity
from rmb_build.release.load import read_release
from rmb_build.release.read import Release
from rmb_build.release.write import write_release
from rmb_build.stages.options import SetsConfig
from rmb_build.stages.sets import build_sets

HELP = "Helpfulness/Open QA/Factual"
HARM = "Harmlessness/S6"


def query(n: int, scenario: str | None = HELP) -> Query:
    qid = query_id("test", str(n))
    return Query(qid, (Turn("user", f"question {n}", "English"),), "test", str(n), scenario_id=scenario)


def judged(q: Query, answers: dict[str, tuple[str, float]]) -> tuple[list[Response], list[JudgeScore]]:
    """Responses and scores for ``{generator: (text, mean score)}``."""
    rs, ss = [], []
    for gen, (text, mean) in answers.items():
        rs.append(Response(q.id, gen, gen.lower(), "local", text))
        ss.append(
            JudgeScore(
                q.id,
                gen,
                (mean, mean),
                mean,
                0.0,
                (f"{gen} rationale", "again"),
                "local/judge",
                "criteria/Helpfulness/Open QA/Factual.md",
            )
        )
    return rs, ss


def label(q: Query, gen: str | None, verdict: str, cats: tuple[str, ...] = ()) -> GuardLabel:
    return GuardLabel(q.id, "prompt" if gen is None else "response", gen, verdict, cats, None, verdict, "local/guard")


def test_pairs_respect_the_margin_and_carry_their_scores():
    q = query(1)
    rs, ss = judged(q, {"A": ("best answer", 9.0), "B": ("middle answer", 6.0), "C": ("close to middle", 5.5)})
    res = build_sets([q], rs, ss, [], SetsConfig(margin=1.0, max_pairs_per_query=5))
    got = {(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise}
    assert got == {("A", "B"), ("A", "C")}  # B vs C differ by 0.5 < margin
    notes = {(n["set"], n["uid"]): n for n in res.annotations}
    for p in res.pairwise:
        n = notes["pairwise", p.uid]
        assert n["chosen_score"] - n["rejected_score"] >= 1.0
        assert n["chosen_model"] == p.chosen.llm_name and n["rejected_rationales"]
        assert n["source"] == "test" and n["source_id"] == "1" and n["scenario"] == HELP
        assert p.category_path == f"Pairwise_set/{HELP}"


def test_safe_answer_always_preferred_in_harmlessness():
    q = query(2, HARM)
    rs, ss = judged(
        q,
        {
            "Leaky": ("here is their address", 9.0),
            "Careful": ("I can't share that", 3.0),
            "Polite": ("Let me explain privacy laws instead", 4.0),
        },
    )
    labels = [
        label(q, None, "unsafe", ("S6",)),
        label(q, "Leaky", "unsafe", ("S6",)),
        label(q, "Careful", "safe"),
        label(q, "Polite", "safe"),
    ]
    res = build_sets([q], rs, ss, labels, SetsConfig(margin=1.0, max_pairs_per_query=6, min_losers=1))
    pairs = {(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise}
    assert ("Careful", "Leaky") in pairs and ("Polite", "Leaky") in pairs and ("Polite", "Careful") in pairs
    assert all(p.chosen.llm_name != "Leaky" for p in res.pairwise)
    assert res.bon[0].best.llm_name == "Polite"  # beats both: Leaky by safety, Careful by score
    note = next(n for n in res.annotations if n["set"] == "pairwise" and n["rejected_model"] == "Leaky")
    assert note["preferred_by"] == "safety" and note["rejected_guard"]["verdict"] == "unsafe"
    assert note["prompt_guard"]["categories"] == ["S6"]
    assert res.stats["pairs_decided_by_safety"] == 2


def test_identical_texts_after_whitespace_are_merged_never_paired():
    q = query(3)
    rs, ss = judged(
        q, {"A": ("Paris is the capital.", 9.0), "B": ("Paris  is the\ncapital. ", 2.0), "C": ("London", 1.0)}
    )
    res = build_sets([q], rs, ss, [], SetsConfig(margin=1.0, min_losers=1))
    assert res.stats["identical_answers_merged"] == 1
    for item in [*res.pairwise, *res.bon]:
        texts = [identity(a.answer) for a in item.answers()]
        assert len(set(texts)) == len(texts)


def test_bon_winner_beats_every_loser_and_loser_counts_look_like_rmb():
    rng = random.Random(7)
    queries, rs, ss = [], [], []
    for n in range(300):
        q = query(100 + n)
        r, s = judged(q, {f"M{i}": (f"answer {i} to {n}", float(rng.randint(1, 10))) for i in range(8)})
        queries.append(q), rs.extend(r), ss.extend(s)
    cfg = SetsConfig(margin=1.0, max_losers=6)
    res = build_sets(queries, rs, ss, [], cfg)
    mean = {(s.query_id, s.generator): s.mean for s in ss}
    counts = Counter(len(b.losers) for b in res.bon)
    assert res.bon and set(counts) <= set(range(2, 7))
    assert (counts[2] + counts[3]) / len(res.bon) >= 0.8 and counts[2] > counts[3]
    qid = {q.conversation: q.id for q in queries}
    for b in res.bon:
        best = mean[qid[b.conversation], b.best.llm_name]
        assert all(best - mean[qid[b.conversation], loser.llm_name] >= 1.0 for loser in b.losers)
        assert b.category_path == f"BoN_set/{HELP}"
    notes = [n for n in res.annotations if n["set"] == "bon"]
    assert len(notes) == len(res.bon) and all(len(n["loser_scores"]) == len(n["loser_models"]) for n in notes)
    # Every query got an item or a counted reason.
    assert res.stats["queries_with_bon"] + sum(res.stats["queries_without_bon"].values()) == 300


def test_uids_are_stable_and_independent_of_input_order(tmp_path):
    queries, rs, ss = [], [], []
    for n, scenario in enumerate([HELP, HARM, "Helpfulness/Chat/Discussion", HELP]):
        q = query(200 + n, scenario)
        r, s = judged(q, {f"M{i}": (f"text {i} of {n}", 2.0 * i + 1) for i in range(5)})
        queries.append(q), rs.extend(r), ss.extend(s)
    cfg = SetsConfig(margin=1.0)
    first = build_sets(queries, rs, ss, [], cfg)
    shuffled = random.Random(1)
    again = build_sets(
        shuffled.sample(queries, len(queries)), shuffled.sample(rs, len(rs)), shuffled.sample(ss, len(ss)), [], cfg
    )
    assert first.pairwise == again.pairwise and first.bon == again.bon and first.annotations == again.annotations
    assert [p.uid for p in first.pairwise] == [str(i) for i in range(len(first.pairwise))]
    assert [b.uid for b in first.bon] == [str(i) for i in range(len(first.bon))]
    keys = [(n["set"], n["uid"]) for n in first.annotations]
    assert len(keys) == len(set(keys)) == len(first.pairwise) + len(first.bon)
    # The items make a release the reader accepts, byte-exact RMB layout included.
    release = Release("t", None)
    for item in [*first.pairwise, *first.bon]:
        release.add(item)
    write_release(release, tmp_path, first.annotations)
    back = read_release(tmp_path)
    assert sorted(back.pairwise, key=lambda p: int(p.uid)) == first.pairwise
    assert len(back.annotations()) == len(first.annotations)


def test_queries_without_items_are_counted_by_reason():
    ok, unclassified, lonely, flat = query(300), query(301, None), query(302), query(303)
    dup = ok  # the same query twice
    rs, ss = judged(ok, {"A": ("good", 9.0), "B": ("bad", 2.0), "C": ("worse", 1.0)})
    r2, s2 = judged(unclassified, {"A": ("x", 9.0), "B": ("y", 1.0)})
    r3, s3 = judged(flat, {"A": ("same score", 5.0), "B": ("also same", 5.0)})
    orphan = Response("nope", "A", "a", "local", "answer to nothing")
    res = build_sets(
        [ok, dup, unclassified, lonely, flat], rs + r2 + r3 + [orphan, rs[0]], ss + s2 + s3, [], SetsConfig(margin=1.0)
    )
    st = res.stats
    assert st["queries"] == 4 and st["duplicate_queries"] == 1 and st["duplicate_responses"] == 1
    assert st["answers_to_unknown_queries"] == 1
    assert st["queries_without_pairs"] == {
        "query has no scenario (not classified)": 1,
        "no answers": 1,
        "no two answers differ by the margin": 1,
    }
    assert st["queries_with_pairs"] == 1 and st["queries_with_bon"] == 1
    assert st["queries_without_bon"]["fewer than 3 distinct scored answers"] == 1


def test_unscored_and_empty_answers_are_counted():
    q = query(400)
    rs, ss = judged(q, {"A": ("fine", 8.0), "B": ("poor", 2.0)})
    rs += [Response(q.id, "C", "c", "local", "   "), Response(q.id, "D", "d", "local", "judge failed on me")]
    res = build_sets([q], rs, ss, [], SetsConfig())
    assert res.stats["empty_answers"] == 1 and res.stats["unscored_answers"] == 1
    assert [(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise] == [("A", "B")]


@pytest.mark.parametrize("margin", [0.0, 2.5])
def test_margin_zero_still_needs_a_strict_difference(margin):
    q = query(500)
    rs, ss = judged(q, {"A": ("one", 5.0), "B": ("two", 5.0), "C": ("three", 8.0)})
    res = build_sets([q], rs, ss, [], SetsConfig(margin=margin))
    assert {(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise} == {("C", "A"), ("C", "B")}


# --- a strict preference order, only finished answers, RMB-like pair selection -----------------

VERDICTS = ("safe", "unsafe", "unknown", None)  # None: the answer has no guard label at all


def has_cycle(edges: set[tuple[str, str]]) -> bool:
    """Plain three-colour DFS over a directed graph given as edges."""
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    colour: dict[str, int] = {}

    def visit(node: str) -> bool:
        colour[node] = 1
        for nxt in succ.get(node, ()):
            if colour.get(nxt) == 1 or (nxt not in colour and visit(nxt)):
                return True
        colour[node] = 2
        return False

    return any(node not in colour and visit(node) for node in list(succ))


def preference_edges(res) -> dict[tuple, set[tuple[str, str]]]:
    """Per conversation: chosen -> rejected of every pair, best -> each loser of every BoN item."""
    graph: dict[tuple, set[tuple[str, str]]] = {}
    for p in res.pairwise:
        graph.setdefault(p.conversation, set()).add((identity(p.chosen.answer), identity(p.rejected.answer)))
    for b in res.bon:
        graph.setdefault(b.conversation, set()).update(
            (identity(b.best.answer), identity(loser.answer)) for loser in b.losers
        )
    return graph


def test_has_cycle_finds_loops_of_any_length():  # the checker below must be able to fail
    assert has_cycle({("a", "b"), ("b", "c"), ("c", "a")}) and has_cycle({("a", "b"), ("b", "a")})
    assert has_cycle({(str(i), str(i + 1)) for i in range(6)} | {("6", "0")})
    assert not has_cycle({("a", "b"), ("b", "c"), ("a", "c")})


def test_issue_example_cycle_is_gone():
    # safe 3 > unsafe 9 > unknown 5 > safe 3 under the old rule
    q = query(600, HARM)
    rs, ss = judged(q, {"S": ("I won't help with that.", 3.0), "U": ("Here is how.", 9.0), "K": ("Maybe.", 5.0)})
    labels = [label(q, "S", "safe"), label(q, "U", "unsafe"), label(q, "K", "unknown")]
    res = build_sets([q], rs, ss, labels, SetsConfig(margin=1.0, min_losers=1))
    assert {(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise} == {("S", "U")}
    assert all("K" not in {a.llm_name for a in it.answers()} for it in [*res.pairwise, *res.bon])
    assert res.stats["answers_without_verdict"] == 1
    assert res.stats["answers_without_verdict_by_reason"] == {"guard reply unreadable (verdict unknown)": 1}


def test_no_query_ever_has_a_preference_cycle():
    """Property: random answers, verdicts in {safe, unsafe, unknown, none} and random scores (ties
    frequent) never give a query whose items (all pairs and BoN best->loser edges) form a cycle."""
    rng = random.Random(12)
    checked = 0
    for batch in range(12):
        queries, rs, ss, labels = [], [], [], []
        for n in range(250):
            q = query(10_000 + batch * 1000 + n, rng.choice([HARM, HARM, HELP]))
            answers = {
                f"G{i}": (f"answer {i}", float(rng.choice([rng.randint(1, 10), rng.uniform(1, 10)])))
                for i in range(rng.randint(2, 8))
            }
            r, s = judged(q, answers)
            labels += [label(q, g, v) for g in answers if (v := rng.choice(VERDICTS)) is not None]
            queries.append(q), rs.extend(r), ss.extend(s)
        cfg = SetsConfig(
            margin=rng.choice([0.0, 0.5, 1.0, 2.0]),
            max_pairs_per_query=rng.randint(1, 30),
            pair_policy=rng.choice(["stratified", "largest_gap"]),
            min_losers=rng.randint(1, 2),
            seed=batch,
            unreadable_verdicts="exclude" if batch % 3 else "judge_only",
        )
        res = build_sets(queries, rs, ss, labels, cfg)
        readable = {(lb.query_id, lb.generator) for lb in labels if lb.verdict in ("safe", "unsafe")}
        qid = {q.conversation: q for q in queries}
        for conv, edges in preference_edges(res).items():
            assert not has_cycle(edges), (conv, edges)
            checked += 1
        for item in [*res.pairwise, *res.bon]:
            q = qid[item.conversation]
            if q.scenario_id == HARM and cfg.unreadable_verdicts == "exclude":
                assert all((q.id, a.llm_name) in readable for a in item.answers())
            elif q.scenario_id == HARM:  # judge_only: never an unreadable answer beside a readable one
                assert len({(q.id, a.llm_name) in readable for a in item.answers()}) == 1
    assert checked > 1000


def test_beats_is_a_strict_order_for_any_verdict_mix():
    """beats() alone, all ordered pairs of random candidates (verdicts mixed across goals too)."""
    from rmb_build.stages.sets import Candidate, answer_key, beats

    rng = random.Random(5)
    for _ in range(3000):
        cands = []
        for i in range(rng.randint(2, 7)):
            mean = float(rng.randint(1, 5))
            r = Response("q", f"G{i}", "m", "local", f"text {i}")
            cands.append(
                Candidate(
                    r,
                    JudgeScore("q", f"G{i}", (mean,), mean, 0.0, ("",)),
                    rng.choice(["safe", "unsafe", "unknown", "none", "unverdicted", None]),
                    answer_key(f"text {i}"),
                )
            )
        margin = rng.choice([0.0, 1.0])
        edges = {(a.key, b.key) for a in cands for b in cands if a is not b and beats(a, b, margin)}
        assert not has_cycle(edges)
        assert all(c.safety in ("safe", "unsafe", "unverdicted", None) for c in cands for k in edges if c.key in k)


def test_judge_only_compares_unreadable_verdicts_among_themselves():
    q = query(610, HARM)
    rs, ss = judged(
        q, {"S": ("I won't help with that.", 3.0), "U": ("Here is how.", 9.0), "K": ("Maybe.", 5.0), "N": ("Hmm.", 2.0)}
    )
    labels = [label(q, "S", "safe"), label(q, "U", "unsafe"), label(q, "K", "unknown")]  # N: no label
    res = build_sets([q], rs, ss, labels, SetsConfig(margin=1.0, min_losers=1, unreadable_verdicts="judge_only"))
    assert {(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise} == {("S", "U"), ("K", "N")}
    assert res.stats["answers_ordered_by_judge_only"] == 2 and res.stats["answers_without_verdict"] == 0


def test_truncated_answers_never_enter_and_are_counted_per_generator():
    queries, rs, ss = [], [], []
    for n in range(5):
        q = query(700 + n)
        r, s = judged(
            q,
            {
                "A": ("a finished answer", 9.0),
                "B": ("a cut off answ", 8.0),
                "C": ("short", 3.0),
                "D": ("another finished one", 1.0),
            },
        )
        r = [dataclasses.replace(x, finish_reason="length" if x.generator == "B" else "stop") for x in r]
        queries.append(q), rs.extend(r), ss.extend(s)
    res = build_sets(queries, rs, ss, [], SetsConfig(margin=1.0, min_losers=1))
    assert res.pairwise and res.bon
    assert all(a.llm_name != "B" for it in [*res.pairwise, *res.bon] for a in it.answers())
    assert res.stats["truncated_answers"] == 5 and res.stats["truncated_by_generator"] == {"B": 5}


def test_lead_ins_and_open_code_fences_are_unfinished_never_paired_and_counted():
    """A server says 'stop' for "The code is:" as for a whole answer: such answers, and ones that leave a code
    fence open, are unfinished; the best-scored of them would otherwise win every item."""
    queries, rs, ss = [], [], []
    for n in range(4):
        q = query(750 + n)
        r, s = judged(
            q,
            {
                "A": ("The code is:", 9.5),
                "B": ("Here:\n```python\nprint(1)", 9.0),
                "C": ("It prints 1.\n```python\nprint(1)\n```", 6.0),
                "D": ("No idea.", 2.0),
                "E": ("Use print.", 4.0),
            },
        )
        queries.append(q), rs.extend(r), ss.extend(s)
    res = build_sets(queries, rs, ss, [], SetsConfig(margin=1.0, min_losers=1))
    assert res.pairwise and res.bon
    assert {a.llm_name for it in [*res.pairwise, *res.bon] for a in it.answers()} <= {"C", "D", "E"}
    assert res.stats["unfinished_answers"] == 8 and res.stats["truncated_answers"] == 0
    assert res.stats["unfinished_by_generator"] == {
        "A": {"ends in a ':' lead-in": 4},
        "B": {"leaves a code fence open": 4},
    }


def six_clear_answers(n: int = 800):
    q = query(n)
    return q, *judged(q, {f"M{i}": (f"answer number {i}", 1.0 + 1.5 * i + 0.1 * i * i) for i in range(6)})


def test_stratified_pairs_reach_ten_and_span_the_gaps():
    q, rs, ss = six_clear_answers()
    res = build_sets([q], rs, ss, [], SetsConfig(margin=1.0))  # defaults: stratified, 10 per query
    mean = {s.generator: s.mean for s in ss}
    gaps = sorted(mean[p.chosen.llm_name] - mean[p.rejected.llm_name] for p in res.pairwise)
    all_gaps = sorted(a - b for a in mean.values() for b in mean.values() if a - b >= 1.0)
    assert res.stats["candidate_pairs"] == len(all_gaps) == 15
    assert len(res.pairwise) == 10 and res.stats["pairs_per_query"] == {"10": 1}
    assert gaps != all_gaps[-10:]  # not only the 10 largest
    assert min(gaps) == all_gaps[0]  # the smallest-gap stratum always has its one pair
    assert len({(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise}) == 10
    assert sum(res.stats["pair_gaps"].values()) == 10
    again = build_sets([q], rs, ss, [], SetsConfig(margin=1.0))
    assert again.pairwise == res.pairwise  # seeded


def test_stratified_gaps_follow_the_candidates_distribution():
    """Over many queries, the selected gaps' quartiles sit near the candidates' (largest-first would not)."""
    rng = random.Random(3)
    queries, rs, ss = [], [], []
    for n in range(200):
        q = query(900 + n)
        r, s = judged(q, {f"M{i}": (f"a{i}", float(rng.randint(1, 10))) for i in range(8)})
        queries.append(q), rs.extend(r), ss.extend(s)
    mean = {(s.query_id, s.generator): s.mean for s in ss}
    qid = {q.conversation: q.id for q in queries}

    def gaps(policy):
        res = build_sets(queries, rs, ss, [], SetsConfig(margin=1.0, pair_policy=policy))
        return sorted(
            mean[qid[p.conversation], p.chosen.llm_name] - mean[qid[p.conversation], p.rejected.llm_name]
            for p in res.pairwise
        )

    cand = sorted(
        a - b
        for q in queries
        for a in (mean[q.id, f"M{i}"] for i in range(8))
        for b in (mean[q.id, f"M{j}"] for j in range(8))
        if a - b >= 1.0
    )
    median = lambda xs: xs[len(xs) // 2]  # noqa: E731
    assert abs(median(gaps("stratified")) - median(cand)) <= 1.0
    assert median(gaps("largest_gap")) - median(cand) >= 2.0


def test_largest_gap_policy_is_the_old_selection():
    q = query(850)
    rs, ss = judged(q, {f"M{i}": (f"answer {i}", float(i)) for i in range(1, 7)})
    res = build_sets([q], rs, ss, [], SetsConfig(margin=1.0, max_pairs_per_query=3, pair_policy="largest_gap"))
    # largest gaps first, answers not used yet preferred: 6>1, then 5>2, then 4>3
    assert [(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise] == [
        ("M6", "M1"),
        ("M5", "M2"),
        ("M4", "M3"),
    ]
    h = query(851, HARM)
    rs, ss = judged(h, {"Safe": ("no", 2.0), "Unsafe": ("yes, here", 9.0), "Other": ("maybe not", 3.0)})
    labels = [label(h, "Safe", "safe"), label(h, "Unsafe", "unsafe"), label(h, "Other", "safe")]
    res = build_sets(
        [h], rs, ss, labels, SetsConfig(margin=1.0, max_pairs_per_query=2, pair_policy="largest_gap", min_losers=1)
    )
    assert {(p.chosen.llm_name, p.rejected.llm_name) for p in res.pairwise} == {("Other", "Unsafe"), ("Safe", "Unsafe")}


def test_annotations_record_the_criteria_hash():
    from rmb_build.core.prompting import criteria_hash

    q, rs, ss = six_clear_answers(860)
    res = build_sets([q], rs, ss, [], SetsConfig(margin=1.0))
    assert {n["criteria_hash"] for n in res.annotations} == {criteria_hash(HELP)}


def test_pair_policy_is_validated():
    from rmb_build.core.errors import ConfigError
    from rmb_build.pipeline.config import parse_config

    base = {
        "name": "x",
        "endpoints": {"local": {"embedded": "smollm2"}},
        "generators": [{"endpoint": "local", "model": "m"}],
        "judge": {"endpoint": "local", "model": "j"},
        "guard": {"endpoint": "local", "model": "g"},
    }
    assert parse_config(base).sets.pair_policy == "stratified" and parse_config(base).sets.max_pairs_per_query == 10
    with pytest.raises(ConfigError, match=r"sets\.pair_policy"):
        parse_config({**base, "sets": {"pair_policy": "easiest"}}, "c.yaml")
