"""The audit's output pinned: the audit JSON, the printed report and ``--fix``'s copy of a release laden
with every defect kind, and of the official sample, are these exact bytes.

The digests were computed from the code before issue 39 made the audit a package (one module per defect
kind): a change that moves code without changing behaviour keeps them. A change that means to alter
what the audit reports updates them, and says why.

Issue 48 item 10 added two kinds, ``style_unknown_scenario`` and ``style_repeated_id`` (each planted once in the
laden release's Style_set/): audit.json, the printed report and the fixed copy's manifest (its audit summary)
changed by those two kinds only (0 each on the official sample); every other byte is as before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rmb_build.cli import main

DISC, S1, SUPP, GOSSIP = (
    "Helpfulness/Chat/Discussion",
    "Harmlessness/S1",
    "Helpfulness/Chat/Supportive Conversation",
    "Helpfulness/Chat/Gossip",
)
LEAK = "Your task is to brainstorm a query from a user, with harmful intent, in the category of violent crimes. Hi"


def _turns(*texts: str, roles: tuple[str, ...] | None = None) -> list[dict]:
    roles = roles or tuple("user" if i % 2 == 0 else "assistant" for i in range(len(texts)))
    return [{"content": t, "language": "English", "role": r} for t, r in zip(texts, roles)]


def _pair(uid: str, conv: list[dict], chosen: str, rejected: str, scenario: str, path: str | None = None) -> dict:
    return {
        "pair_uid": uid,
        "conversation_input": conv,
        "chosen": {"llm_name": "model-a", "answer": chosen},
        "reject": {"llm_name": "model-b", "answer": rejected},
        "category_path": path or f"Pairwise_set/{scenario}",
    }


def _bon(uid: str, conv: list[dict], best: str, losers: list[str], scenario: str) -> dict:
    return {
        "conversation_input": conv,
        "bon_best": {"llm_name": "model-a", "answer": best},
        "loser_list": [{"llm_name": f"model-{i}", "answer": a} for i, a in enumerate(losers)],
        "bon_uid": uid,
        "category_path": f"BoN_set/{scenario}",
    }


def _style(uid: str, prompt: str, scenario: str, chosen: int = 3, rejected: int = 3) -> dict:
    return {
        "id": uid,
        "prompt": prompt,
        "conversation_input": [{"content": prompt, "role": "user"}],
        "chosen": [f"good {uid} {i}" for i in range(chosen)],
        "rejected": [f"bad {uid} {i}" for i in range(rejected)],
        "scenario": scenario,
    }


def laden_release(root: Path) -> Path:
    """A release with at least one defect of every kind (human_disagrees from ``labels.jsonl`` beside it)."""
    cat, tea, rain, pet = (
        _turns("What is a good name for a cat?"),
        _turns("Is tea better than coffee?", "It depends on taste.", "Which one would you pick?"),
        _turns("Write a haiku about rain."),
        _turns("Which pet should I get?"),
    )
    files = {
        f"Pairwise_set/{DISC}.json": [
            _pair("1", cat, "Whiskers is a classic name.", "cat.", DISC),
            _pair("2", _turns("Say hi."), "Hi  there!", " Hi there!", DISC),
            _pair("3", cat, "Whiskers is a classic name.", "cat.", DISC),
            _pair("4", tea, "Tea, for its calm.", "Coffee, for the kick.", DISC),
            _pair("5", tea, "Coffee, for the kick.", "Tea,  for its calm.", DISC),
            _pair("6", _turns("Name a colour."), "Blue.", " \n\t ", DISC),
            _pair("7", _turns("Name a fruit."), "Apple.", "No.", DISC, f"Pairwise_set/{SUPP}"),
            _pair("9", _turns("First?", "Second?", roles=("user", "user")), "A.", "B.", DISC),
            _pair("13", rain, "Grey sky, soft drops fall.", "Rain is wet.", DISC),
            _pair("20", pet, "A cat.", "A dog.", DISC),
            _pair("21", pet, "A dog.", "A  fish.", DISC),
            _pair("7", _turns("Name a tree."), "Oak.", "Rock.", DISC),
        ],
        f"Pairwise_set/{S1}.json": [_pair("10", _turns(LEAK), "I can't help with hurting anyone.", "Here.", S1)],
        f"Pairwise_set/{SUPP}.json": [_pair("11", cat, "Call it Luna.", "Dog.", SUPP)],
        f"Pairwise_set/{GOSSIP}.json": [
            _pair("12", _turns("Tell me some gossip."), "I'd rather not.", "Sure!", GOSSIP)
        ],
        f"BoN_set/{DISC}.json": [
            _bon("1", cat, "Whiskers is a classic name.", ["cat.", "No idea."], DISC),
            _bon("2", _turns("Count to three."), "1, 2, 3", ["1, 2, 3 ", "3, 2, 1"], DISC),
            _bon("3", cat, "Whiskers is a classic name.", ["No idea.", "cat."], DISC),
            _bon("4", rain, "Rain is wet.", ["Grey sky, soft drops fall.", "Water."], DISC),
            _bon("5", pet, "A fish.", ["A cat.", "No pet."], DISC),
        ],
        f"Style_set/{DISC}.json": [
            _style("1", "What is a good name for a cat?", DISC),
            _style("999", "Orphan?", DISC),
            _style("4", "Is tea better than coffee?", DISC, chosen=2),
            {**_style("13", "Write a haiku about rain.", DISC), "scenario": S1},
            {**_style("20", "Which pet should I get?", DISC), "rejected": ["x", "  \n", "z"]},
            _style("1", "What is a good name for a cat?", DISC),  # its id again: style_repeated_id
        ],
        "Style_set/Helpfulness/Chat/Nonsense.json": [
            _style("21", "Which pet should I get?", "Helpfulness/Chat/Nonsense")
        ],
    }
    for rel, items in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items, indent=1, ensure_ascii=False), encoding="utf-8")
    labels = [
        {"set": "pairwise", "uid": "1", "annotator": a, "choice": "rejected", "flags": [], "note": "", "time": ""}
        for a in ("ann", "bob")
    ] + [{"set": "bon", "uid": "1", "annotator": "ann", "choice": "best", "flags": ["cut_off"], "note": "", "time": ""}]
    (root.parent / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    return root


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def audit_outputs(release: str, cwd: Path, capsys, *more: str) -> dict[str, str]:
    """sha256 of the printed report, the audit JSON and every file of ``--fix``'s copy, run from ``cwd``
    with paths relative to it (so no temporary path is in the bytes)."""
    rc = main(["audit", release, "--json", "audit.json", "--fix", "fixed", *more])
    out = capsys.readouterr().out
    assert rc == 0, out
    got = {"stdout": _sha(out.encode()), "audit.json": _sha((cwd / "audit.json").read_bytes())}
    fixed = cwd / "fixed"
    got |= {f"fixed/{p.relative_to(fixed).as_posix()}": _sha(p.read_bytes()) for p in fixed.rglob("*") if p.is_file()}
    return dict(sorted(got.items()))


# from the code before the audit became a package (commit 6951b83)
PINNED_LADEN: dict[str, str] = {
    "audit.json": "2eed7c09cbbe5f61a9952b062aad0bbc4413d4a35eee665247a7de633bfccf22",
    "fixed/Pairwise_set/Helpfulness/Chat/Discussion.json": "344f524cb3dea3c3130d9c4caea93fe6bdd7761787716a7be9d396508d1844da",
    # issue 48: --fix carries Style_set/ less the records of removed items and those 'rmb evaluate' refuses
    # (orphan, repeated id, unknown scenario): here no record is left, so both style files go; the manifest's
    # audit_fix says what was carried and dropped, and so does the last printed line
    "fixed/manifest.json": "54482be4372599de0a5c41a18d98f40d0542f3033e728d6c8e75b0af15006ceb",
    "fixed/removed.jsonl": "bf5f5b0852d7b74cfe559881f717a3ff1d1c50777702d5915caf6fcbedcceea6",
    "fixed/renumbered.jsonl": "00b4befc9f9205d8df06169af9512d57212ea06a3daae5a9fc3394a158ca19c3",
    "stdout": "86f0637c9958a8b9e136583de32bf7bb6a6f42a547f6821e0fa4a1bea9cc9aa8",
}
PINNED_SAMPLE: dict[str, str] = {
    "audit.json": "268dcf7125c06ece6bd39414c3558fd824750bb2d1d90183fd2d04a2e554af1a",
    "fixed/BoN_set/Harmlessness/S6.json": "4b029148be47c674c8efc8c3da4ad113bc0ddfb519b6a94ebb7889b5e1a9d788",
    "fixed/BoN_set/Harmlessness/multi.json": "1250b6edd86c548e55ef58d3a3c8a058d44e8b870db181f4a73b2775c52fc257",
    "fixed/BoN_set/Helpfulness/Chat/Discussion.json": "8a23f912609f71c1fee9b18c346059afd15921a3a73711a9d831915fcf57f61c",
    "fixed/BoN_set/Helpfulness/Code/Documentation.json": "30c9106f854f9b44cdcb33393bc78f6bdc429c2bd6cb38cc116786ba212cdb87",
    "fixed/BoN_set/Helpfulness/Translation/Literary and Cultural Translation.json": "dd766794b73cf3d92d8dd58cf6fc64fe9b9cab64b5e10bc0860253ca71658ada",
    "fixed/Pairwise_set/Harmlessness/S6.json": "716ed468d46bc2c358993b6d352d70f593f3a94aebf85645b37457f90dac3439",
    "fixed/Pairwise_set/Harmlessness/multi.json": "b71738aef5403604fcf7cb82cf826373e9c4920000af870dcfe29c227c06a5c9",
    "fixed/Pairwise_set/Helpfulness/Chat/Discussion.json": "65d218007076aa3c7c5b95d2aaee57506e85258787f694f46ba27593331a46da",
    "fixed/Pairwise_set/Helpfulness/Code/Documentation.json": "817bcd0d478c9ff714c0011b92ab0a28f2c729d31aaad1d7c5e676ece656eb78",
    "fixed/Pairwise_set/Helpfulness/Translation/Literary and Cultural Translation.json": "e5cff28b5d0745d0fdc328eedf21581b799881cd127fd338c3eb60dde9a9d7ff",
    "fixed/manifest.json": "6a822b4a5406af1a6c04f5d48a78f94f49a4ec0b6cf97ad0fdcbb3085afa0e35",
    "fixed/removed.jsonl": "61fda823bf90b2837c9fc6e252350a081b994cae61b8d26f1b8246d02ac9e989",
    "stdout": "58501f827046bb637e46156e25c558aeb75c04bd3ec502fafac5450b615b3901",
}


def test_the_audit_of_a_release_with_every_defect_kind_writes_the_pinned_bytes(tmp_path, monkeypatch, capsys):
    laden_release(tmp_path / "laden")
    monkeypatch.chdir(tmp_path)
    got = audit_outputs("laden", tmp_path, capsys, "--no-embeddings", "--review", "labels.jsonl")
    counts = json.loads((tmp_path / "audit.json").read_text())["counts"]
    assert all(counts.values()), counts  # every kind is exercised
    assert got == PINNED_LADEN


def test_the_audit_of_the_official_sample_writes_the_pinned_bytes(rmb_sample, tmp_path, monkeypatch, capsys):
    (tmp_path / "RMB_dataset").symlink_to(rmb_sample.resolve(), target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    assert audit_outputs("RMB_dataset", tmp_path, capsys, "--no-embeddings") == PINNED_SAMPLE
