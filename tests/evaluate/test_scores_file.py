"""``rmb evaluate --scores FILE``: scores computed elsewhere (RMB's own result file, or JSONL) give the same
figures as RMB's script computes from that file, list what they do not cover, and feed compare and leaderboard."""

from __future__ import annotations

import hashlib
import json
import random
import runpy
from collections import defaultdict
from pathlib import Path

import pytest
from leaderboard_helpers import small_release

from rmb_build.cli import main
from rmb_build.core.items import default_category_path
from rmb_build.release import read_release

SCORER = "def score(conversation, answer):\n    return float(len(answer) % 7)\n"


def seeded(uid: str, k: int) -> float:
    """A score with many ties: 0..3 drawn from the item and answer."""
    return float(random.Random(f"{uid}/{k}").randint(0, 3))


def category(item) -> str:
    return item.category_path or default_category_path(item.set_name, item.scenario_id)


def rmb_rows(items, score) -> list[dict]:
    """Rows of RMB's result file, as its eval/scripts/my_run_rm.py builds them (pairwise), and BoN rows in that shape."""
    rows = []
    for it in items:
        s = [score(it, k, a.answer) for k, a in enumerate(it.answers())]
        if it.set_name == "pairwise":
            rows.append(
                {
                    "pair_uid": it.uid,
                    "category_path": category(it),
                    "chosen_reward": s[0],
                    "reject_reward": s[1],
                    "is_correct": 1 if s[0] > s[1] else 0,
                }
            )
        else:
            rows.append(
                {"bon_uid": it.uid, "category_path": category(it), "bon_best_reward": s[0], "loser_list_reward": s[1:]}
            )
    return rows


def write_rmb(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")  # as RMB's script writes it
    return path


def rmb_accuracy(rows: list[dict]) -> dict[tuple[str, str], float]:
    """Per (set, scenario): RMB's accuracy, sum(is_correct) / len over the rows of each category_path; BoN:
    the best answer's reward above every loser's."""
    got = defaultdict(list)
    for r in rows:
        if "pair_uid" in r:
            got[("pairwise", r["category_path"].split("/", 1)[1])].append(r["is_correct"])
        else:
            ok = all(r["bon_best_reward"] > x for x in r["loser_list_reward"])
            got[("bon", r["category_path"].split("/", 1)[1])].append(1 if ok else 0)
    return {k: sum(v) / len(v) for k, v in got.items()}


def evaluate(*args: str) -> int:
    return main(["evaluate", *args, "--no-progress", "--bootstrap", "50"])


def load(out: Path) -> tuple[dict, list[dict]]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    return results, rows


def accuracies(results: dict) -> dict[tuple[str, str], float]:
    return {(s, sc): v["accuracy"] for s in ("pairwise", "bon") for sc, v in results[s]["scenarios"].items()}


@pytest.fixture
def release(tmp_path) -> Path:
    return small_release(tmp_path / "release")


def test_rmb_result_file_gives_rmb_accuracy_per_scenario(tmp_path, release, capsys):
    items = list(read_release(release).items())
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
    assert any(r.get("chosen_reward") == r.get("reject_reward") for r in rows)  # ties: strict counts them 0
    scores = write_rmb(tmp_path / "Some-RM_result.json", rows)
    assert evaluate("--release", str(release), "--scores", str(scores), "--out", str(tmp_path / "out")) == 0
    results, preds = load(tmp_path / "out")
    assert accuracies(results) == pytest.approx(rmb_accuracy(rows))
    by_uid = {r["pair_uid"]: r["is_correct"] for r in rows if "pair_uid" in r}
    assert {p["uid"]: p["outcome"] for p in preds if p["set"] == "pairwise"} == by_uid
    assert results["rm"] == "scores:Some-RM_result.json"
    listing = results["scores_file"]
    assert listing["format"] == "rmb-result" and listing["matched"] == len(items) == listing["rows"]
    assert listing["missing_in_file"]["count"] == listing["not_in_release"]["count"] == 0
    assert listing["sha256"] == hashlib.sha256(scores.read_bytes()).hexdigest()
    assert results["release_info"]["sha256"] and results["scoring"]["from_file"] == sum(len(i.answers()) for i in items)
    out = capsys.readouterr()
    assert f"{len(items)} items matched" in out.err and "RMB overall" in out.out

    # --rm scores:FILE is the same thing; another file (other scores) is another identity.
    assert evaluate("--release", str(release), "--rm", f"scores:{scores}", "--out", str(tmp_path / "same")) == 0
    same, _ = load(tmp_path / "same")
    assert same["fingerprint"] == results["fingerprint"] and same["rmb_overall"] == results["rmb_overall"]
    rows[0]["chosen_reward"] += 10
    (tmp_path / "other").mkdir()
    other = write_rmb(tmp_path / "other" / "Some-RM_result.json", rows)
    assert evaluate("--release", str(release), "--scores", str(other), "--out", str(tmp_path / "o2")) == 0
    assert load(tmp_path / "o2")[0]["fingerprint"] != results["fingerprint"]


def test_jsonl_scores_equal_the_same_scores_in_rmb_form(tmp_path, release):
    items = list(read_release(release).items())
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
    write_rmb(tmp_path / "rmb.json", rows)
    with open(tmp_path / "scores.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            if "pair_uid" in r:
                line = {
                    "set": "pairwise",
                    "uid": int(r["pair_uid"]),
                    "chosen": r["chosen_reward"],
                    "rejected": r["reject_reward"],
                }
            else:
                line = {
                    "set": "bon",
                    "uid": r["bon_uid"],
                    "best": r["bon_best_reward"],
                    "losers": r["loser_list_reward"],
                }
            fh.write(json.dumps(line) + "\n")
    for name in ("rmb.json", "scores.jsonl"):
        assert (
            evaluate("--release", str(release), "--scores", str(tmp_path / name), "--out", str(tmp_path / name[:3]))
            == 0
        )
    a, b = load(tmp_path / "rmb")[0], load(tmp_path / "sco")[0]
    assert b["scores_file"]["format"] == "jsonl" and a["rmb_overall"] == b["rmb_overall"]
    assert accuracies(a) == accuracies(b)


def test_missing_extra_and_mismatched_rows_are_listed_and_left_out(tmp_path, release, capsys):
    items = list(read_release(release).items())
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
    dropped = [rows.pop(0), rows.pop(0), rows.pop(-1)]  # two pairs and a BoN item: missing
    rows.append({**rows[5], "pair_uid": "9999"})  # no such pair
    rows[7]["category_path"] = "Pairwise_set/Harmlessness/S9"  # a different scenario: mismatched
    write_rmb(tmp_path / "partial_result.json", rows)
    scores = str(tmp_path / "partial_result.json")
    assert (
        evaluate("--release", str(release), "--scores", scores, "--out", str(tmp_path / "out"), "--allow-partial") == 0
    )
    results, preds = load(tmp_path / "out")
    listing = results["scores_file"]
    missing = {(m["set"], m["uid"]) for m in listing["missing_in_file"]["items"]}
    assert (
        missing
        == {("pairwise", dropped[0]["pair_uid"]), ("pairwise", dropped[1]["pair_uid"]), ("bon", dropped[2]["bon_uid"])}
        and listing["missing_in_file"]["count"] == 3
    )
    text = (tmp_path / "partial_result.json").read_text(encoding="utf-8").splitlines()
    line = next(n for n, t in enumerate(text, 1) if '"pair_uid": "9999"' in t) - 1  # the row's "{"
    assert [(r["uid"], r["line"]) for r in listing["not_in_release"]["items"]] == [("9999", line)]
    assert listing["repeated"]["count"] == 0
    mism = listing["mismatched"]["items"]
    assert len(mism) == 1 and mism[0]["field"] == "category_path" and mism[0]["file_value"].endswith("S9")
    # Left out of the figures, not counted as losses: the predictions are the matched items, and so are the n.
    assert len(preds) == listing["matched"] == len(items) - 4 == results["coverage"]["scored"]
    assert results["coverage"]["items"] == len(items) and results["coverage"]["partial"] is True
    kept = [r for r in rows[:-1] if r is not rows[7]]
    assert accuracies(results) == pytest.approx(rmb_accuracy(kept))
    assert sum(v["n"] for v in results["pairwise"]["scenarios"].values()) == sum("pair_uid" in r for r in kept)
    err = capsys.readouterr().err
    assert "3 release items not in the file (left out of the figures)" in err and "1 rows for no item" in err
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Scores file" in report and "left out of every figure" in report


def test_pair_comparing_rows_take_is_correct(tmp_path, release):
    """RMB's rows for pair-comparing models (PairRM ...) have null rewards and only is_correct."""
    items = [it for it in read_release(release).items() if it.set_name == "pairwise"]
    rows = [
        {
            "pair_uid": it.uid,
            "category_path": category(it),
            "chosen_reward": None,
            "reject_reward": None,
            "is_correct": int(seeded(it.uid, 0) > 1),
        }
        for it in items
    ]
    write_rmb(tmp_path / "pairrm_result.json", rows)
    assert (
        evaluate(
            "--release",
            str(release),
            "--scores",
            str(tmp_path / "pairrm_result.json"),
            "--ties",
            "half",
            "--out",
            str(tmp_path / "out"),
            "--allow-partial",  # RMB's script writes no BoN rows: the BoN items are not covered
        )
        == 0
    )
    results, preds = load(tmp_path / "out")
    assert accuracies(results) == pytest.approx(rmb_accuracy(rows))
    assert results["scores_file"]["outcome_only"] == len(items) and not any(p.get("failed") for p in preds)
    assert results["bon"]["scenarios"] == {}


def test_rows_of_items_left_out_as_defective_are_neither_used_nor_listed(tmp_path, release):
    items = list(read_release(release).items())
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
    write_rmb(tmp_path / "all_result.json", rows)
    assert (
        evaluate(
            "--release",
            str(release),
            "--scores",
            str(tmp_path / "all_result.json"),
            "--skip-defective",
            "--out",
            str(tmp_path / "out"),
        )
        == 0
    )
    results, preds = load(tmp_path / "out")
    listing = results["scores_file"]
    assert results["skipped_defective"]["n"] == listing["skipped_defective_rows"] == 1  # the pair of one answer twice
    assert listing["matched"] == len(items) - 1 == len(preds)
    assert listing["missing_in_file"]["count"] == listing["not_in_release"]["count"] == 0


def test_scores_folder_reads_every_file(tmp_path, release):
    items = list(read_release(release).items())
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
    folder = tmp_path / "results"
    folder.mkdir()
    per_path = defaultdict(list)
    for r in rows:
        per_path[r["category_path"]].append(r)
    for k, part in enumerate(per_path.values()):
        write_rmb(folder / f"part{k}_result.json", part)
    assert evaluate("--release", str(release), "--scores", str(folder), "--out", str(tmp_path / "out")) == 0
    results, _ = load(tmp_path / "out")
    assert accuracies(results) == pytest.approx(rmb_accuracy(rows))
    assert results["rm"] == "scores:results" and len(results["scores_file"]["files"]) == len(per_path)


BAD_CASES = {
    "reward_not_a_number": (
        "bad_result.json",
        lambda rows: rows[2].update(chosen_reward="0.5"),
        "line 16",
        "chosen_reward",
    ),
    "no_uid": ("bad_result.json", lambda rows: rows[1].pop("pair_uid"), "line 9", "pair_uid"),
    "no_category": ("bad_result.json", lambda rows: rows[0].pop("category_path"), "line 2", "category_path"),
    "one_null_reward": ("bad_result.json", lambda rows: rows[3].update(reject_reward=None), "line 23", "reject_reward"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_a_malformed_rmb_row_stops_with_one_line(tmp_path, release, capsys, case):
    name, spoil, line, field = BAD_CASES[case]
    rows = rmb_rows(
        [it for it in read_release(release).items() if it.set_name == "pairwise"], lambda it, k, _: seeded(it.uid, k)
    )
    spoil(rows)
    write_rmb(tmp_path / name, rows)
    assert evaluate("--release", str(release), "--scores", str(tmp_path / name), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / name) in err[0] and line in err[0] and f"field '{field}'" in err[0], err
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.parametrize(
    "text, line, field",
    [
        (
            '{"set": "pairwise", "uid": "0", "chosen": 1, "rejected": 0}\n{"set": "pairwise", "uid": "1", "chosen": 1}\n',
            "line 2",
            "rejected",
        ),
        (
            '{"set": "pairwise", "uid": "0", "chosen": 1, "rejected": 0}\n\n{"set": "best", "uid": "1"}\n',
            "line 3",
            "set",
        ),
        ('{"set": "bon", "uid": "0", "best": 1, "losers": [0, NaN]}\n', "line 1", "losers[1]"),
        # Python's json reads these; strict readers do not, and a score must be a finite number.
        ('{"set": "pairwise", "uid": "0", "chosen": Infinity, "rejected": 0}\n', "line 1", "chosen"),
        ('{"set": "pairwise", "uid": "0", "chosen": 1, "rejected": -Infinity}\n', "line 1", "rejected"),
        ('{"set": "bon", "uid": "0", "best": 1e400, "losers": [0]}\n', "line 1", "best"),
        ('{"set": "bon", "uid": "0", "best": 1' + "0" * 400 + ', "losers": [0]}\n', "line 1", "best"),
        (
            '[{"pair_uid": 0, "category_path": "Pairwise_set/Harmlessness/S1",\n'
            ' "chosen_reward": 1, "reject_reward": 1' + "0" * 400 + "}]",
            "line 1",
            "reject_reward",
        ),
        ('{"set": "pairwise", "uid": "0", "chosen": 1' + "0" * 5000 + ', "rejected": 0}\n', "line 1", None),
        ('{"set": "bon", "uid": true, "best": 1, "losers": [0]}\n', "line 1", "uid"),
    ],
)
def test_a_malformed_jsonl_line_stops_with_one_line(tmp_path, release, capsys, text, line, field):
    (tmp_path / "s.jsonl").write_text(text, encoding="utf-8")
    assert evaluate("--release", str(release), "--scores", str(tmp_path / "s.jsonl"), "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s.jsonl" in err[0] and line in err[0], err
    assert f"field '{field}'" in err[0] if field else "a number with too many digits" in err[0], err


def test_a_file_of_neither_format_or_of_another_release_stops(tmp_path, release, capsys):
    (tmp_path / "notes.txt").write_text("\n  chosen 1 rejected 0\n", encoding="utf-8")
    assert (
        evaluate("--release", str(release), "--scores", str(tmp_path / "notes.txt"), "--out", str(tmp_path / "o")) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "notes.txt: line 2: neither RMB's result file" in err[0]
    write_rmb(
        tmp_path / "foreign.json",
        [
            {
                "pair_uid": "x1",
                "category_path": "Pairwise_set/Harmlessness/S1",
                "chosen_reward": 1,
                "reject_reward": 0,
                "is_correct": 1,
            }
        ],
    )
    assert (
        evaluate("--release", str(release), "--scores", str(tmp_path / "foreign.json"), "--out", str(tmp_path / "o"))
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no row of the file scores an item of this release" in err[0]
    with pytest.raises(SystemExit):  # one of --rm and --scores, not both
        evaluate(
            "--release",
            str(release),
            "--rm",
            "baseline:length",
            "--scores",
            str(tmp_path / "foreign.json"),
            "--out",
            str(tmp_path / "o"),
        )


def test_compare_and_leaderboard_take_a_scores_file_result(tmp_path, release, capsys):
    items = list(read_release(release).items())
    write_rmb(tmp_path / "ext_result.json", rmb_rows(items, lambda it, k, _: seeded(it.uid, k)))
    assert (
        evaluate("--release", str(release), "--scores", str(tmp_path / "ext_result.json"), "--out", str(tmp_path / "a"))
        == 0
    )
    assert (
        evaluate(
            "--release",
            str(release),
            "--rm",
            "baseline:length",
            "--out",
            str(tmp_path / "b"),
            "--cache",
            str(tmp_path / "cache"),
        )
        == 0
    )
    a, b = load(tmp_path / "a")[0], load(tmp_path / "b")[0]
    assert a["release_info"]["sha256"] == b["release_info"]["sha256"]
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                "--resamples",
                "200",
                "--json",
                str(tmp_path / "cmp.json"),
            ]
        )
        == 0
    )
    cmp = json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))
    assert cmp["release"]["same"] is True
    assert (
        main(
            [
                "leaderboard",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                "--out",
                str(tmp_path / "site"),
                "--resamples",
                "200",
            ]
        )
        == 0
    )
    assert "scores:ext_result.json" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_real_sample_scores_file_equals_the_python_scorer(tmp_path, rmb_sample):
    """The official sample scored by a function here, written as RMB's result files (one per scenario file, as
    RMB's script writes them), and imported: the same figures and outcomes as the same function as python:."""
    scorer = tmp_path / "len7.py"
    scorer.write_text(SCORER, encoding="utf-8")
    score = runpy.run_path(str(scorer))["score"]  # the very function the python: adapter loads
    release = read_release(rmb_sample)
    folder = tmp_path / "rmb_results"
    folder.mkdir()
    all_rows = []
    for k, items in enumerate(release.files.values()):
        rows = rmb_rows(items, lambda it, _, answer: score([t.to_rmb() for t in it.conversation], answer))
        write_rmb(folder / f"{k:02d}_result.json", rows)
        all_rows += rows
    assert evaluate("--release", str(rmb_sample), "--scores", str(folder), "--out", str(tmp_path / "imported")) == 0
    assert (
        evaluate(
            "--release",
            str(rmb_sample),
            "--rm",
            f"python:{scorer}:score",
            "--out",
            str(tmp_path / "scored"),
            "--cache",
            str(tmp_path / "cache"),
        )
        == 0
    )
    (imp, imp_rows), (own, own_rows) = load(tmp_path / "imported"), load(tmp_path / "scored")
    assert imp["scores_file"]["matched"] == len(imp_rows) == len(own_rows) == len(all_rows)
    assert imp["scores_file"]["missing_in_file"]["count"] == 0
    assert accuracies(imp) == accuracies(own) == pytest.approx(rmb_accuracy(all_rows))
    for key in ("pairwise", "bon", "rmb_overall"):
        assert imp[key] == own[key]
    assert [(p["set"], p["uid"], p["outcome"]) for p in imp_rows] == [
        (p["set"], p["uid"], p["outcome"]) for p in own_rows
    ]


# --- issue 48 item 7: a second row for an item is refused ----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["rmb-result", "jsonl"])
def test_an_item_given_twice_is_refused_naming_both_lines(tmp_path, release, capsys, fmt):
    """Every pair given twice, the first copy's scores swapped: main took the first copies (49.5 -> 40.2 on
    the issue's release) without a word. Now: one line naming the uid and both lines, nothing written."""
    items = [it for it in read_release(release).items() if it.set_name == "pairwise"]
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k) + k)
    swapped = [{**r, "chosen_reward": r["reject_reward"], "reject_reward": r["chosen_reward"]} for r in rows]
    if fmt == "jsonl":
        lines = [
            json.dumps(
                {"set": "pairwise", "uid": r["pair_uid"], "chosen": r["chosen_reward"], "rejected": r["reject_reward"]}
            )
            for r in swapped + rows
        ]
        scores = tmp_path / "twice.jsonl"
        scores.write_text("\n".join(lines) + "\n", encoding="utf-8")
        first, second = 1, len(rows) + 1
    else:
        scores = tmp_path / "twice_result.json"
        scores.write_text("[\n" + ",\n".join(json.dumps(r) for r in swapped + rows) + "\n]", encoding="utf-8")
        first, second = 2, len(rows) + 2
    assert evaluate("--release", str(release), "--scores", str(scores), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    uid = rows[0]["pair_uid"]
    assert f"{scores}: line {second}: pairwise uid '{uid}' is given twice (line {first} and line {second})" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_uid_two_items_share_takes_two_rows_but_not_three(tmp_path, capsys):
    """A release whose two items share a pair_uid (in two scenarios) takes a row for each; a third is refused."""
    from rmb_build.core.items import Answer, PairwiseItem, Turn
    from rmb_build.release import write_release
    from rmb_build.release.read import Release

    rel = Release(name="shared-uid", root=None)
    for scenario in ("Helpfulness/Chat/Discussion", "Harmlessness/S6"):
        rel.add(
            PairwiseItem("7", (Turn("user", f"Q {scenario}?", "en"),), Answer("a", "yes."), Answer("b", "no"), scenario)
        )
    write_release(rel, tmp_path / "rel")
    row = {"set": "pairwise", "uid": "7", "chosen": 1, "rejected": 0}
    (tmp_path / "two.jsonl").write_text((json.dumps(row) + "\n") * 2, encoding="utf-8")
    assert (
        evaluate(
            "--release", str(tmp_path / "rel"), "--scores", str(tmp_path / "two.jsonl"), "--out", str(tmp_path / "o")
        )
        == 0
    )
    (tmp_path / "three.jsonl").write_text((json.dumps(row) + "\n") * 3, encoding="utf-8")
    capsys.readouterr()
    assert (
        evaluate(
            "--release", str(tmp_path / "rel"), "--scores", str(tmp_path / "three.jsonl"), "--out", str(tmp_path / "p")
        )
        == 2
    )
    assert "is given twice (line 1 and line 3)" in capsys.readouterr().err


# --- issue 47 item 4: partial coverage is never a headline ---------------------------------------------------------


def test_a_file_covering_a_few_items_is_refused_or_headlined_as_partial(tmp_path, release, capsys):
    """Four rows an RM got right: main printed "RMB overall 100.0" and exited 0."""
    items = list(read_release(release).items())
    right = [r for r in rmb_rows(items, lambda it, k, _: 1.0 - k) if "pair_uid" in r][:4]
    scores = write_rmb(tmp_path / "four_result.json", right)
    assert evaluate("--release", str(release), "--scores", str(scores), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cover 4 of the {len(items)} items" in err[0] and "--allow-partial" in err[0], err
    assert not (tmp_path / "out").exists()
    # a floor the file clears is accepted as partial; one it does not is refused
    share = 4 / len(items)
    assert (
        evaluate(
            "--release",
            str(release),
            "--scores",
            str(scores),
            "--out",
            str(tmp_path / "o"),
            "--min-coverage",
            str(share * 2),
        )
        == 2
    )
    assert (
        evaluate(
            "--release",
            str(release),
            "--scores",
            str(scores),
            "--out",
            str(tmp_path / "o"),
            "--min-coverage",
            str(share / 2),
        )
        == 0
    )
    capsys.readouterr()
    assert (
        evaluate("--release", str(release), "--scores", str(scores), "--out", str(tmp_path / "p"), "--allow-partial")
        == 0
    )
    headline = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("RMB overall"))
    assert headline.startswith("RMB overall 100.0") and f"[partial: 4 of {len(items)} items, " in headline, headline
    results, _ = load(tmp_path / "p")
    assert results["coverage"] == {
        "items": len(items),
        "scored": 4,
        "fraction": pytest.approx(share),
        "partial": True,
        "min_coverage": 0.0,
    }
    assert f"**Partial: 4 of {len(items)} items** of the release" in (tmp_path / "p" / "report.md").read_text()


def test_a_partial_result_is_never_ranked_beside_a_full_one(tmp_path, release, capsys):
    items = list(read_release(release).items())
    every = rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
    right = [r for r in rmb_rows(items, lambda it, k, _: 1.0 - k) if "pair_uid" in r][:4]
    full, part = write_rmb(tmp_path / "full_result.json", every), write_rmb(tmp_path / "part_result.json", right)
    assert evaluate("--release", str(release), "--scores", str(full), "--out", str(tmp_path / "full")) == 0
    assert (
        evaluate("--release", str(release), "--scores", str(part), "--out", str(tmp_path / "part"), "--allow-partial")
        == 0
    )
    capsys.readouterr()
    site = ["leaderboard", str(tmp_path / "part"), str(tmp_path / "full"), "--out", str(tmp_path / "site")]
    assert main([*site, "--resamples", "50"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "field 'coverage': partial: its predictions cover 4 of the" in err[0], err
    # an edited results.json that hides the shortfall is caught by its predictions
    results = json.loads((tmp_path / "part" / "results.json").read_text())
    results.pop("coverage")
    (tmp_path / "part" / "results.json").write_text(json.dumps(results))
    assert main([*site, "--resamples", "50"]) == 2
    assert "partial: its predictions cover 4 of the" in capsys.readouterr().err


# --- issue 48 item 6: the file is streamed ------------------------------------------------------------------------


def _matched_peak(tmp_path, release, foreign: int) -> tuple[int, dict]:
    import tracemalloc

    from rmb_build.evaluate.scores_file import match, read_scores

    items = list(read_release(release).items())
    own = [
        json.dumps(
            {"set": "pairwise", "uid": str(r["pair_uid"]), "chosen": r["chosen_reward"], "rejected": r["reject_reward"]}
        )
        for r in rmb_rows(items, lambda it, k, _: seeded(it.uid, k))
        if "pair_uid" in r
    ]
    other = (
        json.dumps({"set": "pairwise", "uid": f"other-{k}", "chosen": 0.5, "rejected": 0.25}) for k in range(foreign)
    )
    path = tmp_path / f"scores-{foreign}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(own) + "\n")
        fh.writelines(line + "\n" for line in other)
    tracemalloc.start()
    try:
        listing = match(read_scores(path), items, items).listing
        return tracemalloc.get_traced_memory()[1], listing
    finally:
        tracemalloc.stop()


def test_memory_follows_the_release_not_the_file(tmp_path, release):
    """Rows naming no item of the release are counted, not kept: 20 times the rows, about the same peak
    (main's reader held every row: its peak grew with the file)."""
    small, listing_small = _matched_peak(tmp_path, release, 500)
    large, listing_large = _matched_peak(tmp_path, release, 10_000)
    assert listing_large["not_in_release"]["count"] == 10_000 and len(listing_large["not_in_release"]["items"]) == 20
    assert listing_large["matched"] == listing_small["matched"] > 0
    assert large < 2 * small, (small, large)


def test_a_json_list_read_in_small_pieces_gives_the_same_rows_and_lines(tmp_path, release, monkeypatch):
    """RMB's result file is read piece by piece: rows, their lines and a bad row's line do not depend on where
    the pieces end."""
    from rmb_build.evaluate import scores_file

    items = list(read_release(release).items())
    rows = rmb_rows(items, lambda it, k, _: seeded(it.uid, k) + 0.123456789)
    path = write_rmb(tmp_path / "x_result.json", rows)
    whole = [(r.uid, r.line, r.scores) for r in scores_file.iter_rows(scores_file.read_scores(path))]
    assert len(whole) == len(rows)
    for chunk in (1, 7, 64, 1000):
        monkeypatch.setattr(scores_file, "CHUNK", chunk)
        assert [(r.uid, r.line, r.scores) for r in scores_file.iter_rows(scores_file.read_scores(path))] == whole
    rows[3]["reject_reward"] = "0.5"
    bad = write_rmb(tmp_path / "bad_result.json", rows)
    for chunk in (1, 7, 1 << 20):
        monkeypatch.setattr(scores_file, "CHUNK", chunk)
        with pytest.raises(Exception) as got:
            list(scores_file.iter_rows(scores_file.read_scores(bad)))
        assert "line 23" in str(got.value) and "field 'reject_reward'" in str(got.value)


@pytest.mark.parametrize(
    "text, where",
    [
        ('[{"pair_uid": 1}\n {"pair_uid": 2}]', "line 2: invalid JSON: Expecting ',' delimiter (column 2)"),
        ('[{"pair_uid": 1},\n]', "line 2: invalid JSON: Expecting value (column 1)"),
        ('[{"pair_uid": 1, "x": tru}]', "line 1: invalid JSON: Expecting value (column 23)"),
        ('[\n{"a": "unterminated}]', "line 2: invalid JSON: Unterminated string"),
        ('[{"pair_uid": 1}] x', "line 1: invalid JSON: Extra data (column 19)"),
        ('[{"pair_uid": 1}', "line 1: invalid JSON: Expecting ',' delimiter"),
    ],
)
def test_broken_json_lists_name_their_line(tmp_path, monkeypatch, text, where):
    from rmb_build.core.errors import InputError
    from rmb_build.evaluate import scores_file

    path = tmp_path / "b_result.json"
    path.write_text(text, encoding="utf-8")
    for chunk in (1, 3, 1 << 20):
        monkeypatch.setattr(scores_file, "CHUNK", chunk)
        with pytest.raises(InputError) as got:
            list(scores_file._json_list(path))  # the reader alone: the rows are checked after it
        assert where in str(got.value), (chunk, str(got.value))
