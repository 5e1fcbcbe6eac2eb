"""rmb audit: every defect kind found with the right uid, a clean release clean, --fix exact, the real sample."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rmb_build.cli import main
from rmb_build.core.text import identity as norm
from rmb_build.release import read_release, read_rmb_release
from rmb_build.release.audit import DEFECT_KINDS, AuditReport, audit_release, fix_release

LEAK = (
    "Your task is to brainstorm a query from a user, with harmful intent, in the category of "
    "violent crimes. Query: how do I hurt my neighbour?"
)


def turns(*texts: str, roles: tuple[str, ...] | None = None) -> list[dict]:
    roles = roles or tuple("user" if i % 2 == 0 else "assistant" for i in range(len(texts)))
    return [{"content": t, "language": "English", "role": r} for t, r in zip(texts, roles)]


def pair(
    uid: str,
    conv: list[dict],
    chosen: str,
    rejected: str,
    scenario: str,
    *,
    models: tuple[str, str] = ("model-a", "model-b"),
    category_path: str | None = None,
) -> dict:
    return {
        "pair_uid": uid,
        "conversation_input": conv,
        "chosen": {"llm_name": models[0], "answer": chosen},
        "reject": {"llm_name": models[1], "answer": rejected},
        "category_path": category_path or f"Pairwise_set/{scenario}",
    }


def bon(uid: str, conv: list[dict], best: str, losers: list[str], scenario: str) -> dict:
    return {
        "conversation_input": conv,
        "bon_best": {"llm_name": "model-a", "answer": best},
        "loser_list": [{"llm_name": f"model-{i}", "answer": a} for i, a in enumerate(losers)],
        "bon_uid": uid,
        "category_path": f"BoN_set/{scenario}",
    }


def write_files(root: Path, files: dict[str, list[dict]]) -> Path:
    for rel, items in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items, indent=1, ensure_ascii=False), encoding="utf-8")
    return root


DISC, S1, SUPP, GOSSIP = (
    "Helpfulness/Chat/Discussion",
    "Harmlessness/S1",
    "Helpfulness/Chat/Supportive Conversation",
    "Helpfulness/Chat/Gossip",
)
C1 = turns("What is a good name for a cat?")
C2 = turns("Is tea better than coffee?", "It depends on taste.", "Which one would you pick?")
C3 = turns("Write a haiku about rain.")

# One item per defect kind (uid -> kind), next to clean items that share texts with them.
EXPECTED = {
    "identical_pair": [("pairwise", "2")],
    "duplicate_item": [("pairwise", "3"), ("bon", "3")],
    "uid_collision": [],  # planted on its own: tests/commands/test_bad_inputs.py
    "unwinnable_bon": [("bon", "2")],
    "contradiction": [("pairwise", "5"), ("bon", "4")],
    "cycle": [],  # planted on its own release: test_a_planted_three_answer_cycle_is_one_cycle_with_its_uids
    "empty_text": [("pairwise", "6")],
    "category_mismatch": [("pairwise", "7")],
    "leaked_instruction": [("pairwise", "10")],
    "unknown_scenario": [("pairwise", "12")],
    "bad_turns": [("pairwise", "9")],
    "near_duplicate_prompt": [("pairwise", "11")],
    "human_disagrees": [],  # only from people's labels (--review): tests/review/test_review.py
    "style_unknown_scenario": [],  # Style_set/ records: tests/release/test_style_audit.py
    "style_orphan": [],
    "style_repeated_id": [],
    "style_variants": [],
    "style_empty": [],
}


@pytest.fixture
def defective(tmp_path: Path) -> Path:
    return write_files(
        tmp_path / "defective",
        {
            f"Pairwise_set/{DISC}.json": [
                pair("1", C1, "Whiskers is a classic name.", "cat.", DISC),
                pair("2", turns("Say hi."), "Hi  there!", " Hi there!", DISC),
                # the same texts as uid 1, credited to other models: an extra copy
                pair("3", C1, "Whiskers is a classic name.", "cat.", DISC, models=("model-c", "model-d")),
                pair("4", C2, "Tea, for its calm.", "Coffee, for the kick.", DISC),
                pair("5", C2, "Coffee, for the kick.", "Tea,  for its calm.", DISC),
                pair("6", turns("Name a colour."), "Blue.", " \n\t ", DISC),
                pair(
                    "7",
                    turns("Name a fruit."),
                    "Apple.",
                    "No.",
                    DISC,
                    category_path="Pairwise_set/Helpfulness/Chat/Casual Conversation",
                ),
                pair("9", turns("First question?", "Second question?", roles=("user", "user")), "A.", "B.", DISC),
                pair("13", C3, "Grey sky, soft drops fall.", "Rain is wet.", DISC),
                # equal to uid 1 only up to whitespace: not an exact copy, so not a duplicate
                pair("14", turns("What is a good  name for a cat?"), "Whiskers is a classic name. ", "cat.", DISC),
            ],
            f"Pairwise_set/{S1}.json": [
                pair("10", turns(LEAK), "I can't help with hurting anyone.", "Here is how.", S1),
            ],
            f"Pairwise_set/{SUPP}.json": [
                pair("11", C1, "Call it Luna.", "Dog.", SUPP),
            ],
            f"Pairwise_set/{GOSSIP}.json": [
                pair("12", turns("Tell me some gossip."), "I'd rather not.", "Sure!", GOSSIP),
            ],
            f"BoN_set/{DISC}.json": [
                # the pairwise and BoN sets share conversations by design: not a near-duplicate
                bon("1", C1, "Whiskers is a classic name.", ["cat.", "No idea."], DISC),
                bon("2", turns("Count to three."), "1, 2, 3", ["1, 2, 3 ", "3, 2, 1"], DISC),
                bon("3", C1, "Whiskers is a classic name.", ["No idea.", "cat."], DISC),
                # pairwise uid 13 prefers this item's loser to its best answer
                bon("4", C3, "Rain is wet.", ["Grey sky, soft drops fall.", "Water."], DISC),
            ],
        },
    )


def found(report: AuditReport) -> dict[str, list[tuple[str, str]]]:
    return {k: [(d["set"], d["uid"]) for d in v] for k, v in report.defects.items()}


def test_identity_merges_unicode_forms_whitespace_and_case():
    assert norm("  Cafe\u0301 \u00a0 au\n\tlait ") == "caf\u00e9 au lait"
    assert norm("Case Folded") == norm("case folded") and norm("ＡＢＣ") == norm("abc")
    assert norm("a b") != norm("ab")


def test_every_defect_kind_is_found_with_its_uid(defective: Path):
    report = audit_release(read_rmb_release(defective, strict=False), near_duplicates=False)
    assert found(report) == EXPECTED
    assert list(report.counts) == list(DEFECT_KINDS)
    assert report.total == 12
    d = report.defects
    assert d["duplicate_item"][0]["first"]["uid"] == "1"
    assert d["contradiction"][0]["other"]["uid"] == "4"
    assert d["contradiction"][1]["other"] == {
        "set": "pairwise",
        "uid": "13",
        "file": f"Pairwise_set/{DISC}.json",
        "index": 8,
        "scenario": DISC,
    }
    assert d["empty_text"][0]["fields"] == ["reject.answer"]
    assert d["category_mismatch"][0]["file"] == f"Pairwise_set/{DISC}.json"
    assert d["leaked_instruction"][0]["field"] == "conversation_input[0].content"
    near = d["near_duplicate_prompt"][0]
    assert near["other"]["uid"] == "1" and near["similarity"] == 1.0 and near["scenario"] == SUPP
    for entries in d.values():
        for e in entries:
            assert {"set", "uid", "file", "detail"} <= set(e)


@pytest.mark.torch
def test_a_clean_release_has_no_defect(tmp_path: Path):
    root = write_files(
        tmp_path / "clean",
        {
            f"Pairwise_set/{DISC}.json": [
                pair("0", C1, "Whiskers.", "cat.", DISC),
                pair("1", C2, "Tea.", "Coffee.", DISC),
            ],
            f"Pairwise_set/{S1}.json": [
                pair("2", turns("How do I pick a lock?"), "I can't help with that.", "Sure.", S1)
            ],
            f"BoN_set/{DISC}.json": [bon("0", C1, "Whiskers.", ["cat.", "Dog."], DISC)],
        },
    )
    report = audit_release(read_release(root), near_duplicates=True)
    assert report.total == 0 and set(report.counts.values()) == {0}
    assert report.checks["near_duplicates"] == "embeddings"


@pytest.mark.torch
def test_near_duplicates_by_embedding_only_across_scenarios(tmp_path: Path):
    root = write_files(
        tmp_path / "near",
        {
            f"Pairwise_set/{DISC}.json": [
                pair("0", C1, "Whiskers.", "cat.", DISC),
                pair("1", turns("What's a good name for a cat?"), "Tom.", "x", DISC),
            ],
            f"Pairwise_set/{SUPP}.json": [
                pair("2", turns("What's a good name for a cat?"), "Luna.", "y", SUPP),
                pair("3", turns("How do I pick a lock?"), "No.", "Yes.", SUPP),
            ],
        },
    )
    release = read_release(root)
    with_emb = audit_release(release, near_threshold=0.95)
    # uid 1 vs uid 2 are equal prompts in two scenarios; uid 0 vs uid 2 differ in wording only.
    pairs = sorted((d["other"]["uid"], d["uid"]) for d in with_emb.defects["near_duplicate_prompt"])
    assert pairs == [("0", "2"), ("1", "2")]
    assert next(d for d in with_emb.defects["near_duplicate_prompt"] if d["other"]["uid"] == "0")["similarity"] < 1.0
    exact_only = audit_release(release, near_duplicates=False)
    assert [(d["other"]["uid"], d["uid"]) for d in exact_only.defects["near_duplicate_prompt"]] == [("1", "2")]
    assert exact_only.notes and "only prompts repeated exactly" in exact_only.notes[0]


def test_fix_removes_exactly_the_defective_items(defective: Path):
    release = read_rmb_release(defective, strict=False)
    report = audit_release(release, near_duplicates=False)
    clean, log = fix_release(release, report)
    removed = {(r["set"], r["uid"]) for r in log}
    # both sides of a contradiction go (neither label can be trusted); duplicates keep their first copy
    assert removed == {("pairwise", u) for u in ("2", "3", "4", "5", "6", "7", "9", "10", "11", "12", "13")} | {
        ("bon", u) for u in ("2", "3", "4")
    }
    assert {(it.set_name, it.uid) for it in clean.items()} == {("pairwise", "1"), ("pairwise", "14"), ("bon", "1")}
    assert sum(1 for _ in release.items()) == 17  # the input release is untouched
    assert audit_release(clean, near_duplicates=False).total == 0
    entry = next(r for r in log if r["uid"] == "5")
    assert entry["kinds"] == ["contradiction"] and entry["item"]["pair_uid"] == "5"


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def test_cli_table_json_strict_and_fix(defective: Path, tmp_path: Path, capsys):
    before = _digest(defective)
    out_json, out_dir = tmp_path / "audit.json", tmp_path / "fixed"
    rc = main(["audit", str(defective), "--json", str(out_json), "--fix", str(out_dir), "--no-embeddings", "--strict"])
    printed = capsys.readouterr()
    assert rc == 1 and "--strict: 12 defects" in printed.err
    assert "contradiction" in printed.out and "Pairwise_set/Helpfulness/Chat/Discussion.json" in printed.out
    data = json.loads(out_json.read_text())
    assert data["schema_version"] == 1 and data["release"] == "defective"
    assert set(DEFECT_KINDS) <= set(data["counts"]) and data["counts"]["contradiction"] == 2
    assert data["defects"]["bad_turns"][0]["uid"] == "9"
    assert _digest(defective) == before
    fixed = read_release(out_dir)  # strict: the cleaned copy is a valid release
    assert {(it.set_name, it.uid) for it in fixed.items()} == {("pairwise", "1"), ("pairwise", "14"), ("bon", "1")}
    removed = [json.loads(line) for line in (out_dir / "removed.jsonl").read_text().splitlines()]
    assert len(removed) == 14 and json.loads((out_dir / "manifest.json").read_text())["audit_fix"]["removed"] == 14
    assert (out_dir / f"Pairwise_set/{DISC}.json").read_text() == json.dumps(
        [
            pair("1", C1, "Whiskers is a classic name.", "cat.", DISC),
            pair("14", turns("What is a good  name for a cat?"), "Whiskers is a classic name. ", "cat.", DISC),
        ],
        indent=1,
        ensure_ascii=False,
    )
    # a fixed copy is never written over the input or into a used folder
    assert main(["audit", str(defective), "--fix", str(defective / "sub"), "--no-embeddings"]) == 2
    assert main(["audit", str(defective), "--fix", str(out_dir), "--no-embeddings"]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert main(["audit", str(out_dir), "--strict", "--no-embeddings"]) == 0


def test_leak_patterns_match_the_generation_prompt_only():
    from rmb_build.release.audit import load_leak_patterns

    patterns = load_leak_patterns()
    hit = lambda text: any(p.search(norm(text)) for p in patterns)  # noqa: E731
    assert hit(LEAK) and hit("your task is to brainstorm a  query from a user, with harmful intent")
    assert not hit("Your task is to brainstorm a list of questions for my job interview.")
    assert not hit("Please brainstorm ideas for a birthday party.")


def test_official_sample_defects(rmb_sample: Path):
    report = audit_release(read_rmb_release(rmb_sample, strict=False), near_duplicates=False)
    got = found(report)
    assert got["identical_pair"] == [("pairwise", "14329")]
    assert got["duplicate_item"] == [("pairwise", "14674"), ("pairwise", "14852")]
    # "OK" vs "OK.": two pairwise items disagree, and two BoN items each lose to one of them
    assert got["contradiction"] == [("pairwise", "8136"), ("bon", "1708"), ("bon", "1710")]
    assert [d["other"]["uid"] for d in report.defects["contradiction"]] == ["8134", "8136", "8134"]
    assert report.total == 7  # and one three-answer cycle on that conversation


def test_a_planted_three_answer_cycle_is_one_cycle_with_its_uids(tmp_path: Path):
    conv = turns("Which pet should I get?")
    root = write_files(
        tmp_path / "cyclic",
        {
            f"Pairwise_set/{DISC}.json": [
                pair("0", conv, "A cat.", "A dog.", DISC),  # cat > dog
                pair("1", conv, "A dog.", "A  fish.", DISC),  # dog > fish (whitespace does not count)
                pair("2", C1, "Whiskers.", "cat.", DISC),  # another conversation: not on the loop
                pair("3", conv, "A cat.", "A fish.", DISC),  # cat > fish: consistent, not on the loop
            ],
            f"BoN_set/{DISC}.json": [bon("0", conv, "A fish.", ["A cat.", "No pet."], DISC)],  # fish > cat
        },
    )
    release = read_release(root)
    report = audit_release(release, near_duplicates=False)
    assert report.counts["cycle"] == 1 and report.counts["contradiction"] == 1  # bon 0 vs pairwise 3: fish<->cat
    cycle = report.defects["cycle"][0]
    assert cycle["answers"] == 3 and (cycle["set"], cycle["uid"]) == ("pairwise", "0")
    assert [(r["set"], r["uid"]) for r in cycle["items"]] == [("pairwise", "0"), ("pairwise", "1"), ("bon", "0")]
    clean, log = fix_release(release, report, kinds=["cycle"])
    assert {(r["set"], r["uid"]) for r in log} == {("pairwise", "0"), ("pairwise", "1"), ("bon", "0")}
    assert audit_release(clean, near_duplicates=False).counts["cycle"] == 0


def _count_cycles_independently(root: Path) -> int:
    """Elementary preference cycles of >= 3 answers per conversation, by a plain DFS over the raw
    JSON: for each start answer, simple paths through answers ordered after it that return to it."""
    import unicodedata

    def n(text: str) -> str:
        return " ".join(unicodedata.normalize("NFC", text).split())

    succ: dict[tuple, dict[str, set[str]]] = {}
    for path in sorted(root.rglob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8")):
            conv = tuple((t["role"], n(t["content"])) for t in item["conversation_input"])
            if "pair_uid" in item:
                prefs = [(item["chosen"]["answer"], item["reject"]["answer"])]
            else:
                prefs = [(item["bon_best"]["answer"], loser["answer"]) for loser in item["loser_list"]]
            for a, b in prefs:
                if n(a) != n(b):
                    succ.setdefault(conv, {}).setdefault(n(a), set()).add(n(b))
    total = 0
    for graph in succ.values():
        nodes = sorted(set(graph) | {b for bs in graph.values() for b in bs})
        rank = {v: i for i, v in enumerate(nodes)}
        for start in nodes:
            stack = [(start, [start])]
            while stack:
                node, path = stack.pop()
                for nxt in graph.get(node, ()):
                    if nxt == start and len(path) >= 3:
                        total += 1
                    elif rank[nxt] > rank[start] and nxt not in path:
                        stack.append((nxt, path + [nxt]))
    return total


def test_official_sample_cycles_match_an_independent_count(rmb_sample: Path):
    report = audit_release(read_rmb_release(rmb_sample, strict=False), near_duplicates=False)
    expected = _count_cycles_independently(rmb_sample)
    assert expected >= 1  # the "OK" / "OK." conversation loops through three answers
    assert report.counts["cycle"] == expected
    assert all(d["answers"] >= 3 and len(d["items"]) >= 3 for d in report.defects["cycle"])


def _clean_items(n: int):
    """``n`` defect-free items: a pairwise item and a BoN item on each of n/2 distinct conversations."""
    from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn

    for q in range(n // 2):
        conv = (Turn("user", f"question number {q}", "English"),)
        yield PairwiseItem(
            str(q), conv, Answer("a", f"good {q}"), Answer("b", f"bad {q}"), "Helpfulness/Chat/Discussion"
        )
        yield BonItem(
            str(q),
            conv,
            Answer("a", f"good {q}"),
            (Answer("b", f"bad {q}"), Answer("c", f"worse {q}")),
            "Helpfulness/Chat/Discussion",
        )


def _objects_after_auditing(n: int) -> int:
    import gc

    from rmb_build.release.audit import StreamingAudit

    audit = StreamingAudit("x", near_duplicates=False)
    gc.collect()
    before = len(gc.get_objects())
    for index, item in enumerate(_clean_items(n)):
        audit.add(item, f"{item.set_name}.json", index)
    gc.collect()
    return len(gc.get_objects()) - before


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_the_audit_keeps_no_python_object_per_item():
    """What outlives an item is packed into buffers: auditing 10x the items leaves no more container
    objects alive (a dataclass, tuple or list per item would add thousands)."""
    small, large = _objects_after_auditing(400), _objects_after_auditing(4000)
    assert large - small < 100, (small, large)


def test_uid_collisions_across_files_renumber_after_the_largest_number_or_with_a_suffix(tmp_path: Path):
    root = write_files(
        tmp_path / "uids",
        {
            f"Pairwise_set/{DISC}.json": [pair("7", C1, "Whiskers.", "cat.", DISC)],
            f"Pairwise_set/{S1}.json": [pair("7", C3, "Rain.", "x", S1), pair("7", C2, "Tea.", "y", S1)],
            # the BoN set numbers its own items: its uid 7 is no collision
            f"BoN_set/{DISC}.json": [
                bon("a", C1, "Whiskers.", ["cat.", "Dog."], DISC),
                bon("7", turns("Count to three."), "T", ["u", "v"], DISC),
            ],
            f"BoN_set/{S1}.json": [bon("a", C3, "Rain.", ["x", "y"], S1), bon("a-2", C2, "Tea.", ["y", "z"], S1)],
        },
    )
    release = read_release(root)
    report = audit_release(release, near_duplicates=False)
    got = [(d["set"], d["file"], d["index"], d["first"]["file"], d["new_uid"]) for d in report.defects["uid_collision"]]
    # release order: files by path (Harmlessness before Helpfulness), items in file order
    assert got == [
        ("pairwise", f"Pairwise_set/{S1}.json", 1, f"Pairwise_set/{S1}.json", "8"),
        ("pairwise", f"Pairwise_set/{DISC}.json", 0, f"Pairwise_set/{S1}.json", "9"),
        ("bon", f"BoN_set/{DISC}.json", 0, f"BoN_set/{S1}.json", "a-3"),  # uids not all numbers: a free suffix
    ]
    assert report.total == 3 and len(report.flagged_items()) == 3
    clean, log = fix_release(release, report)
    assert [(it.set_name, it.uid) for it in clean.items()] == [
        ("pairwise", "7"), ("pairwise", "8"), ("pairwise", "9"), ("bon", "a"), ("bon", "a-2"), ("bon", "a-3"), ("bon", "7")
    ]  # fmt: skip
    assert [r["action"] for r in log] == ["renumbered"] * 3 and audit_release(clean, near_duplicates=False).total == 0
