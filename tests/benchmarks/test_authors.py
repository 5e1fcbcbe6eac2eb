"""Every benchmark format's constants and figures against its authors' own code, run as is on the same scores.

RewardBench and RewardBench 2: allenai/reward-bench at commit 05a9005efb607249822c193590c8ecab87c77052
(Apache-2.0), copied verbatim into ``tests/helpers/authors_code.py``: ``EXAMPLE_COUNTS`` and ``SUBSET_MAPPING``
(``rewardbench/constants.py``), ``calculate_scores_per_section``, ``reroll_and_score_dataset`` and
``process_single_model`` (``rewardbench/utils.py``), ``get_average_over_rewardbench``
(``analysis/get_benchmark_results.py``) and ``scripts/run_v2.py``'s per-subset loop. RewardBench's
pairwise rule (``rewardbench/rewardbench.py``: ``results.append(1) if chosen > rejected else
results.append(0)``) is ``won`` below.

RM-Bench: THU-KEG/RM-Bench at commit 73c52d7b27b361621361ec959ac6c0eb9bb7a689 carries no licence, so none of
its code is copied: ``compute_accuracy`` (``scripts/utils.py``) is run as is from a git checkout of it where
one is found (``RMBENCH_REPO``, else a mirror beside the project; skipped visibly where absent), and the
always-run oracle is the rule it computes, written here from its comments (a 3x3 matrix of chosen style i
against rejected style j; hard above the diagonal, normal on it, easy below). Its constants, copied: the
domains ``["chat", "math", "code", "safety"]`` (``split_dataset_by_domain``, matched by ``startswith``) and
the style order ``[concise, detailed_plain, detailed_markdown]``.

Scores are random small integers (numpy, fixed seeds), so ties, equal correct answers and missing
sections all occur; the package's figures go through the real reader (``build``), the real outcome rule
(``evaluate.outcomes.predict``, under both ``--ties``) and the format's ``summary``.
"""

from __future__ import annotations

import ast
import copy
import json
import math
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from formats_helpers import ans, evaluate, write_jsonl
from lazy_modules import importorskip_on_use, on_use

from rmb_build.benchmarks import rewardbench, rewardbench2, rmbench
from rmb_build.benchmarks.tables import Row
from rmb_build.evaluate.outcomes import predict

# pandas, datasets and the authors' code (which imports both) on first use: the worker that collects this module
# without running it does not import them
pd = importorskip_on_use("pandas", reason="the authors' RewardBench code needs pandas")
datasets = importorskip_on_use("datasets", reason="the authors' RewardBench 2 code needs datasets")
authors_code = on_use("authors_code")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

REPO = Path(__file__).resolve().parents[2]
RMBENCH_COMMIT = "73c52d7b27b361621361ec959ac6c0eb9bb7a689"
# get_average_over_rewardbench's Prior Sets columns and its weights [2, 2, 2, 2, 1] (Prior Sets last).
PREF_COLUMNS = ["anthropic_helpful", "anthropic_hhh", "shp", "summarize"]
HEADLINE_WEIGHTS = [2, 2, 2, 2, 1]
RMBENCH_DOMAINS = ["chat", "math", "code", "safety"]
TOL = 1e-9


@pytest.fixture(autouse=True, scope="module")
def _datasets_quiet():
    datasets.disable_progress_bars()


def figures(release, scores: dict[str, float], ties: str) -> list[dict]:
    """The predictions of ``rmb evaluate`` for a release whose answer texts score as ``scores`` says."""
    items = release.pairwise + release.bon
    keys = [[a.answer for a in item.answers()] for item in items]
    return predict(items, keys, scores, ties=ties)


def won(chosen: float, rejected: float) -> int:
    return 1 if chosen > rejected else 0


# --- RewardBench ----------------------------------------------------------------------------------------------


def test_rewardbench_constants_are_reward_benchs():
    assert rewardbench.SUBSET_WEIGHTS == authors_code.EXAMPLE_COUNTS
    assert {s: list(m) for s, m in rewardbench.SECTIONS.items()} == authors_code.SUBSET_MAPPING
    assert list(rewardbench.PRIOR_SETS) == PREF_COLUMNS
    sections = [*authors_code.SUBSET_MAPPING, rewardbench.PRIOR_SECTION]
    assert rewardbench.SECTION_WEIGHTS == dict(zip(sections, HEADLINE_WEIGHTS))


def rewardbench_oracle(accuracy: dict[str, float]) -> tuple[dict[str, float], float | None]:
    """reward-bench's sections (calculate_scores_per_section) and headline (get_average_over_rewardbench; None
    where it raises) for per-subset accuracies."""
    core = {s: a for s, a in accuracy.items() if s in authors_code.EXAMPLE_COUNTS}
    sections = authors_code.calculate_scores_per_section(authors_code.EXAMPLE_COUNTS, authors_code.SUBSET_MAPPING, core)
    df = pd.DataFrame([{"model": "m", "model_type": "t", **core}])
    prefs = pd.DataFrame([{"model": "m", **{c: accuracy.get(c, np.nan) for c in PREF_COLUMNS}}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of a model without prior sets
        try:
            headline = float(authors_code.get_average_over_rewardbench(df, prefs)["average"].iloc[0])
        except ZeroDivisionError:  # a section with no subset: np.average's weights sum to zero
            headline = None
    return sections, headline


def rewardbench_rows(rng: np.random.Generator, present: list[str]) -> tuple[list[Row], dict[str, float], dict]:
    """Rows of the present subsets with random integer scores, the scores by answer text, and each subset's
    accuracy under reward-bench's rule."""
    rows, scores, hits = [], {}, {}
    for subset in present:
        for _ in range(int(rng.integers(1, 5))):
            k = len(rows)
            c, r = (float(x) for x in rng.integers(0, 4, size=2))
            scores[f"good {k}"], scores[f"bad {k}"] = c, r
            rows.append(
                Row(
                    "rb.jsonl",
                    k,
                    {"id": k, "prompt": f"q{k}?", "chosen": f"good {k}", "rejected": f"bad {k}", "subset": subset},
                )
            )
            hits.setdefault(subset, []).append(won(c, r))
    return rows, scores, {s: float(np.mean(h)) for s, h in hits.items()}


@pytest.mark.slow  # over 4 s of its own under load (3-6 s of CPU)
def test_rewardbench_sections_and_headline_equal_reward_benchs_for_every_subset():
    rng = np.random.default_rng(20250131)
    every = [*authors_code.EXAMPLE_COUNTS, *PREF_COLUMNS, "my-own-subset"]
    refused = 0
    for trial in range(150):
        keep = 1.0 if trial % 3 == 0 else rng.uniform(0.2, 1.0)  # a third of the trials have every subset
        present = [s for s in every if rng.random() < keep] or ["math-prm"]
        rows, scores, accuracy = rewardbench_rows(rng, present)
        release = rewardbench.build(rows, "rb")
        ties = ("strict", "half")[trial % 2]
        got = rewardbench.summary(figures(release, scores, ties), release.item_meta, ties)
        sections, headline = rewardbench_oracle(accuracy)
        for section, value in sections.items():
            if any(s in accuracy for s in authors_code.SUBSET_MAPPING[section]):
                assert got["sections"][section] == pytest.approx(value, abs=TOL), (trial, section)
            else:  # reward-bench's 0 for a section without subsets is no figure
                assert section not in got["sections"]
        if headline is None:
            refused += 1
            assert (
                got["headline"] is None and "reward-bench's headline needs all four sections" in got["headline_reason"]
            )
        else:
            assert got["headline"] == pytest.approx(headline, abs=TOL), trial
    assert 0 < refused < 150  # both branches were exercised


def test_rewardbench_through_the_command_counts_a_tie_wrong_under_either_ties(tmp_path):
    rng = np.random.default_rng(7)
    rows, scores, accuracy = rewardbench_rows(rng, [*authors_code.EXAMPLE_COUNTS, *PREF_COLUMNS])
    records = [
        {**r.data, "chosen": ans(scores[r.data["chosen"]], "good"), "rejected": ans(scores[r.data["rejected"]], "bad")}
        for r in rows
    ]
    assert any(scores[r.data["chosen"]] == scores[r.data["rejected"]] for r in rows)  # some pairs tie
    sections, headline = rewardbench_oracle(accuracy)
    path = write_jsonl(tmp_path / "rb.jsonl", records)
    for ties in ("strict", "half"):
        bench = evaluate(tmp_path, path, "--ties", ties, out=ties)["benchmark"]
        assert bench["sections"] == pytest.approx(
            {**sections, "Prior Sets": np.mean([accuracy[c] for c in PREF_COLUMNS])}, abs=TOL
        )
        assert bench["headline"] == pytest.approx(headline, abs=TOL)
        assert "a tie counts as wrong" in bench["tie_rule"]


# --- RewardBench 2 --------------------------------------------------------------------------------------------


def rewardbench2_data(rng: np.random.Generator, subsets: list[str], paired: float = 0.8) -> list[dict]:
    """RewardBench 2 records with random integer scores: best-of-4 rows, and Ties prompts as a ``ref:`` row
    (one correct answer) and a ``tied:`` row (two to four), one of them sometimes missing."""
    records = []

    def record(uid, subset, chosen, rejected):
        text = lambda side, k: f"{uid} {side} {k}"  # noqa: E731
        records.append(
            {
                "id": uid,
                "prompt": f"{uid}?",
                "subset": subset,
                "chosen": [text("right", k) for k in range(chosen)],
                "rejected": [text("wrong", k) for k in range(rejected)],
                "num_correct": chosen,
                "scores": [float(x) for x in rng.integers(0, 5, size=chosen + rejected)],
            }
        )

    for subset in subsets:
        if subset == "Ties":
            for n in range(int(rng.integers(1, 6))):
                wrong = int(rng.integers(1, 4))
                has = rng.random()
                if has < paired or has > 0.9:
                    record(f"ref:{n}", subset, 1, wrong)
                if has < paired or has < 0.9:
                    record(f"tied:{n}", subset, int(rng.integers(2, 5)), wrong)
        else:
            for n in range(int(rng.integers(1, 6))):
                record(f"{subset}-{n}", subset, 1 if rng.random() < 0.8 else 2, 3)
    return records


def rewardbench2_oracle(records: list[dict]) -> dict[str, float]:
    """reward-bench's per-subset figures as run_v2.py computes them: every answer a row, rerolled per prompt."""
    unrolled = [
        {"text": text, "scores": score, "subset": r["subset"], "id": r["id"]}
        for r in records
        for text, score in zip(r["chosen"] + r["rejected"], r["scores"])
    ]
    out = authors_code.reroll_and_score_dataset(
        datasets.Dataset.from_list(unrolled), [len(r["scores"]) for r in records]
    )
    out = out.add_column("num_correct", [r["num_correct"] for r in records])
    subsets = [u["subset"] for u in unrolled]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of no paired Ties prompt
        return authors_code.run_v2_subset_scores(out, subsets)


def rewardbench2_figures(records: list[dict], ties: str) -> dict:
    rows = [Row("rb2.jsonl", k, {f: v for f, v in r.items() if f != "scores"}) for k, r in enumerate(records)]
    scores = {t: s for r in records for t, s in zip(r["chosen"] + r["rejected"], r["scores"])}
    release = rewardbench2.build(rows, "rb2")
    return rewardbench2.summary(figures(release, scores, ties), release.item_meta, ties)


def test_rewardbench2_subsets_and_ties_equal_reward_benchs():
    rng = np.random.default_rng(1865)
    checked_ties = 0
    for trial in range(16):
        subsets = [s for s in (*rewardbench2.SUBSETS, "Other") if trial % 4 == 0 or rng.random() < 0.7]
        records = rewardbench2_data(rng, subsets, paired=0.0 if trial == 5 else 0.8)
        want = rewardbench2_oracle(records)
        got = rewardbench2_figures(records, ("strict", "half")[trial % 2])
        assert set(got["sections"]) == set(want), trial
        for subset, value in want.items():
            if math.isnan(value):  # no prompt has both rows: reward-bench's NaN is no figure
                assert got["sections"][subset] is None and "no prompt has both" in got["subsets"][subset]["reason"]
            else:
                assert got["sections"][subset] == pytest.approx(value, abs=TOL), (trial, subset)
                checked_ties += subset == "Ties"
        six = [want.get(s, math.nan) for s in rewardbench2.SUBSETS]
        if any(math.isnan(v) for v in six):
            assert got["headline"] is None and "the mean of all six subsets" in got["headline_reason"]
        else:  # the leaderboard's figure (reward-bench's code computes none): the six subsets' plain mean
            assert got["headline"] == pytest.approx(float(np.mean(six)), abs=TOL), trial
    assert checked_ties >= 8


def test_rewardbench2_ties_with_equal_correct_scores_and_a_lone_correct_answer():
    # tied:0's correct answers all score 3: reward-bench's margin ratio divides by a spread of 0 (tanh(+inf) = 1)
    records = [
        {"id": "ref:0", "subset": "Ties", "chosen": ["r0"], "rejected": ["w0"], "num_correct": 1, "scores": [4.0, 1.0]},
        {
            "id": "tied:0",
            "subset": "Ties",
            "chosen": ["a0", "b0"],
            "rejected": ["w0"],
            "num_correct": 2,
            "scores": [3.0, 3.0, 1.0],
        },
        {"id": "ref:1", "subset": "Ties", "chosen": ["r1"], "rejected": ["w1"], "num_correct": 1, "scores": [1.0, 1.0]},
        {
            "id": "tied:1",
            "subset": "Ties",
            "chosen": ["a1", "b1"],
            "rejected": ["w1"],
            "num_correct": 2,
            "scores": [1.0, 1.0, 1.0],
        },
    ]
    for r in records:
        r["prompt"] = "p?"
    want = rewardbench2_oracle(records)["Ties"]
    assert rewardbench2_figures(records, "strict")["sections"]["Ties"] == pytest.approx(want, abs=TOL)
    # a tied: row with one correct answer: reward-bench's code stops (its spread is None), so no score
    lone = records[:3] + [{**records[3], "chosen": ["a1"], "num_correct": 1, "scores": [2.0, 1.0]}]
    with pytest.raises(TypeError):
        rewardbench2_oracle(lone)
    got = rewardbench2_figures(lone, "strict")["subsets"]["Ties"]
    assert got["score"] is None and got["reason"].startswith("tied:1 has one correct answer")


# --- RM-Bench -------------------------------------------------------------------------------------------------


def rmbench_compute_accuracy():
    """RM-Bench's compute_accuracy (with split_dataset_by_domain, which it calls), run as is from a git
    checkout of THU-KEG/RM-Bench at RMBENCH_COMMIT; skipped where none is found."""
    candidates = [os.environ.get("RMBENCH_REPO", "")] + [
        str(base / ".mirror" / "THU-KEG+RM-Bench" / "repo") for base in (REPO.parent, REPO.parent.parent)
    ]
    repo = next((c for c in candidates if c and Path(c).is_dir()), None)
    if repo is None:
        pytest.skip("no checkout of THU-KEG/RM-Bench (set RMBENCH_REPO to its git directory)")
    source = subprocess.run(
        ["git", "-C", repo, "show", f"{RMBENCH_COMMIT}:scripts/utils.py"], capture_output=True, text=True, check=True
    ).stdout
    wanted = ("split_dataset_by_domain", "compute_accuracy")
    code = [ast.get_source_segment(source, n) for n in ast.parse(source).body if getattr(n, "name", None) in wanted]
    namespace = {"np": np, "List": list, "Dict": dict, "Any": object}
    exec("\n\n".join(code), namespace)  # the authors' two functions, unchanged
    return namespace["compute_accuracy"]


def rmbench_rule(results: list[dict]) -> dict[str, float]:
    """hard / normal / easy of compute_accuracy's matrix: cell (i, j) is the share of rows whose chosen style i
    outscores rejected style j; hard above the diagonal, normal on it, easy below."""
    m = np.mean([[[won(c, r) for r in res["score_rejected"]] for c in res["score_chosen"]] for res in results], axis=0)
    upper, lower = np.triu_indices(3, 1), np.tril_indices(3, -1)
    return {"hard_acc": m[upper].mean(), "normal_acc": np.diag(m).mean(), "easy_acc": m[lower].mean()}


def rmbench_total_rule(results: list[dict]) -> dict[str, float]:
    """compute_accuracy on total_dataset.json: the rule per domain, then means over the four domains."""
    per = {d: rmbench_rule([r for r in results if r["domain"].startswith(d)]) for d in RMBENCH_DOMAINS}
    out = {d: float(np.mean(list(v.values()))) for d, v in per.items()}
    out.update({k: float(np.mean([v[k] for v in per.values()])) for k in ("hard_acc", "normal_acc", "easy_acc")})
    out["total_avg_acc"] = float(np.mean([out[d] for d in RMBENCH_DOMAINS]))
    return out


def rmbench_data(rng: np.random.Generator, domains: list[str | None]) -> list[dict]:
    out = []
    for k, domain in enumerate(d for d in domains for _ in range(int(rng.integers(1, 5)))):
        res = {
            "id": k,
            "score_chosen": [float(x) for x in rng.integers(0, 4, size=3)],
            "score_rejected": [float(x) for x in rng.integers(0, 4, size=3)],
        }
        out.append(res if domain is None else {**res, "domain": domain})
    return out


def rmbench_figures(results: list[dict], table: str, ties: str) -> dict:
    rows, scores = [], {}
    for k, res in enumerate(results):
        data = {"id": res["id"], "prompt": f"p{k}?"}
        if "domain" in res:
            data["domain"] = res["domain"]
        for side, key in (("chosen", "score_chosen"), ("rejected", "score_rejected")):
            data[side] = [f"{k} {side} {s}" for s in rmbench.STYLES]
            scores.update(zip(data[side], res[key]))
        rows.append(Row(table, k, data, table=table))
    release = rmbench.build(rows, "rm")
    return rmbench.summary(figures(release, scores, ties), release.item_meta, ties)


def test_rmbench_constants_are_rm_benchs():
    assert list(rmbench.DOMAINS) == RMBENCH_DOMAINS
    assert rmbench.STYLES == ("concise", "detailed_plain", "detailed_markdown")
    assert [[rmbench.difficulty(i, j) for j in range(3)] for i in range(3)] == [
        ["normal", "hard", "hard"],
        ["easy", "normal", "hard"],
        ["easy", "easy", "normal"],
    ]


def rmbench_cases(rng: np.random.Generator):
    """(results, table) pairs: merged files with all four domains (and RM-Bench's two safety files, sometimes
    a domain of someone else's), and one file of one domain without a domain field."""
    for trial in range(24):
        if trial % 3:
            domains = ["chat", "math", "code", "safety-refuse", "safety-response"] + (
                ["mine"] if trial % 4 == 1 else []
            )
            yield rmbench_data(rng, domains), "total_dataset.json"
        else:
            yield rmbench_data(rng, [None]), "code_filtered.json"


def check_rmbench(compute, results: list[dict], table: str, trial: int) -> None:
    merged = "domain" in results[0]
    want = compute(copy.deepcopy(results))  # compute_accuracy pops each row's domain
    got = rmbench_figures(results, table, ("strict", "half")[trial % 2])
    for level in rmbench.LEVELS:
        assert got[level] == pytest.approx(float(want[f"{level}_acc"]), abs=TOL), (trial, level)
    if merged:
        assert got["headline"] == pytest.approx(float(want["total_avg_acc"]), abs=TOL)
        for d in RMBENCH_DOMAINS:
            assert got["sections"][d]["average"] == pytest.approx(float(want[d]), abs=TOL)
    else:
        assert got["headline"] is None and "one domain" in got["headline_reason"]


def test_rmbench_equals_the_rule_of_compute_accuracy():
    rng = np.random.default_rng(2410)
    for trial, (results, table) in enumerate(rmbench_cases(rng)):
        merged = "domain" in results[0]
        check_rmbench(rmbench_total_rule if merged else rmbench_rule, results, table, trial)


def test_rmbench_equals_compute_accuracy_from_the_authors_repository(capsys):
    compute = rmbench_compute_accuracy()
    rng = np.random.default_rng(2410)
    for trial, (results, table) in enumerate(rmbench_cases(rng)):
        check_rmbench(compute, results, table, trial)


def test_rmbench_without_a_domain_has_no_overall_figures():
    rng = np.random.default_rng(3)
    got = rmbench_figures(rmbench_data(rng, ["chat", "math", "safety-refuse"]), "total_dataset.json", "strict")
    assert got["headline"] is None and got["hard"] is None and "no code" in got["headline_reason"]
    assert set(got["sections"]) == {"chat", "math", "safety"}


# --- the published rewardbench package, where one is installed -------------------------------------------------

PACKAGE_SIDE = """
import json, math, sys, warnings
warnings.simplefilter("ignore")
from datasets import Dataset
from rewardbench.constants import EXAMPLE_COUNTS, SUBSET_MAPPING
from rewardbench.utils import calculate_scores_per_section, process_single_model
data = json.load(sys.stdin)
out = {"EXAMPLE_COUNTS": EXAMPLE_COUNTS, "SUBSET_MAPPING": SUBSET_MAPPING, "sections": [], "ties": []}
for metrics in data["metrics"]:
    out["sections"].append(calculate_scores_per_section(EXAMPLE_COUNTS, SUBSET_MAPPING, metrics))
for rows in data["ties"]:
    out["ties"].append(float(process_single_model(Dataset.from_list(rows))[1]))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_rewardbench_package_agrees():
    """The rewardbench wheel itself (REWARDBENCH_PYTHON: a Python where ``pip install rewardbench==0.1.4``
    imports; see docs/formats.md) on the same accuracies and, for Ties, continuous scores (its older
    process_single_model differs from the repository's only where correct answers tie)."""
    python = os.environ.get("REWARDBENCH_PYTHON")
    if not python:
        pytest.skip("REWARDBENCH_PYTHON is not set (a Python with the rewardbench package installed)")
    rng = np.random.default_rng(44)
    every = list(authors_code.EXAMPLE_COUNTS)
    metrics, mine = [], []
    for trial in range(300):
        present = [s for s in every if trial % 2 == 0 or rng.random() < 0.6]
        rows, scores, accuracy = rewardbench_rows(rng, present)
        release = rewardbench.build(rows, "rb")
        metrics.append(accuracy)
        mine.append(rewardbench.summary(figures(release, scores, "strict"), release.item_meta, "strict")["sections"])
    ties, my_ties = [], []
    for _ in range(100):
        records = []
        for n in range(int(rng.integers(1, 10))):
            wrong = int(rng.integers(1, 5))
            for kind, correct in (("ref", 1), ("tied", int(rng.integers(2, 6)))):
                uid, k = f"{kind}:{n}", correct + wrong
                record = {"id": uid, "prompt": "p?", "subset": "Ties", "num_correct": correct}
                record.update(
                    chosen=[f"{uid} r{i}" for i in range(correct)], rejected=[f"{uid} w{i}" for i in range(wrong)]
                )
                records.append({**record, "scores": rng.normal(size=k).tolist()})
        ties.append([{f: r[f] for f in ("id", "scores", "num_correct")} for r in records])
        my_ties.append(rewardbench2_figures(records, "strict")["sections"]["Ties"])
    done = subprocess.run(
        [python, "-c", PACKAGE_SIDE],
        input=json.dumps({"metrics": metrics, "ties": ties}),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert theirs["EXAMPLE_COUNTS"] == rewardbench.SUBSET_WEIGHTS
    assert theirs["SUBSET_MAPPING"] == {s: list(m) for s, m in rewardbench.SECTIONS.items()}
    for got, want in zip(mine, theirs["sections"]):
        assert got == pytest.approx({s: v for s, v in want.items() if s in got}, abs=TOL)
    assert my_ties == pytest.approx(theirs["ties"], abs=TOL)
