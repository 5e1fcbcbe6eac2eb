"""The shipped label set ``sharegpt-harm``: how its ShareGPT prompts were drawn, how two LLM annotators'
labels became it, and what it measures (inter-annotator agreement, how common harmful prompts are
in ShareGPT, and the embedding classifier's precision there).

    python bench/sharegpt_harm_labels.py pool --out DIR        # the prompts to label (pool.jsonl) and key.jsonl
    python bench/sharegpt_harm_labels.py combine --key DIR/key.jsonl --a A.jsonl --b B.jsonl \\
        [--exclude N:why ...]                                  # the label set, from two LLM annotators' files
    python bench/sharegpt_harm_labels.py measure              # recompute the figures into the set's .json

The pool: the demo source's prompts (first turns of 15-600 characters, at least 95% ASCII; exact
copies once), from which the 250 the classifier finds most harmful, every one a broad keyword pattern
matches, and 400 drawn at random (seed 0), shuffled (seed 1) so an annotator cannot tell which is
which. Annotators label every prompt with one of S1-S11 or none (docs/harm_labels.md has the
guidelines). A prompt enters the set with a scenario only when both annotators call it harmful in
the same category; ``--exclude`` sets a scenario aside with the reason (kept in the file).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import numpy as np

from rmb_build.core.intervals import clopper_pearson
from rmb_build.core.json_array import ArrayTail, iter_json_array
from rmb_build.core.records import Turn
from rmb_build.core.taxonomy import HARMLESSNESS, parse_scenario_id
from rmb_build.review.agreement import cohen_kappa
from rmb_build.stages.classify import classifier_text, embedding_classifier
from rmb_build.stages.harm_evidence import measurement
from rmb_build.stages.sources.label_sets import load_label_set, prompt_digest
from rmb_build.stages.sources.sharegpt import packaged_sharegpt

NAME = "sharegpt-harm"
SET_DIR = Path(__file__).resolve().parent.parent / "rmb_build" / "stages" / "sources" / "labels"
TOP, RANDOM, SEED_RANDOM, SEED_SHUFFLE = 250, 400, 0, 1
KEYWORDS = re.compile(
    r"\b(kill|murder|bomb|explosive|meth\b|cocaine|heroin|weed|marijuana|drug|hack|porn|nsfw|sexy|sex|nude|naked|"
    r"erotic|racist|racism|suicid|self-harm|weapon|gun|steal|stolen|illegal|phishing|malware|ransomware|keylogger|"
    r"virus|exploit|jailbreak|\bDAN\b|torture|rape|slur|insult|offensive|cheat|fraud|scam|launder|poison|terror|"
    r"nazi|hitler|abuse|violen|fake|propaganda|counterfeit|pirat|torrent|crack|bypass|ignore (all )?(the )?previous|"
    r"content (filter|policy)|uncensored|no restrictions|dose|dosage|mg\b|medication|prescri|symptom|diagnos|pills?|"
    r"lawsuit|sue\b|lawyer|legal advice|invest|stock|crypto|tax|copyright|trademark|lyrics|plagiar|password|spy|"
    r"track (my|someone)|address of|phone number|private|dox|joke about|stereotyp|jew|muslim|black people|gay|trans\b|"
    r"women are|depress|anxiety|overdose|diet|lose weight|fast(ing)?\b|alcohol|drunk|gambl|bet\b|casino)",
    re.I,
)


def first_turns() -> list[dict]:
    """ShareGPT's first user turns as the demo source keeps them, exact copies once, in file order."""
    out, seen, tail = [], set(), ArrayTail()
    with packaged_sharegpt() as path:
        for _, rec in iter_json_array(path, tail):
            turns = rec.get("conversations") or []
            if not turns or turns[0].get("from") != "human":
                continue
            text = (turns[0].get("value") or "").strip()
            if not (15 <= len(text) <= 600 and sum(c.isascii() for c in text) >= 0.95 * len(text)):
                continue
            if text.lower() not in seen:
                seen.add(text.lower())
                out.append({"source_id": str(rec.get("id")), "text": text})
    return out


def p_harm(texts: list[str]) -> np.ndarray:
    """The default embedding classifier's P(harm) (the score ``harm_evidence`` thresholds)."""
    clf = embedding_classifier(None, backend="onnx")
    proba = clf.predict_proba([classifier_text((Turn("user", t),)) for t in texts])
    cols = np.array([parse_scenario_id(label).goal == HARMLESSNESS for label in clf.labels])
    return proba[:, cols].sum(axis=1)


def make_pool(out: Path) -> None:
    prompts = first_turns()
    scores = p_harm([p["text"] for p in prompts])
    drawn: dict[str, list[str]] = {}
    # ranked on 4 decimals, ties in file order: the same ranking on any machine's float rounding
    for k in sorted(range(len(prompts)), key=lambda k: -round(float(scores[k]), 4))[:TOP]:
        drawn.setdefault(prompts[k]["source_id"], []).append("top")
    for p in prompts:
        if KEYWORDS.search(p["text"]):
            drawn.setdefault(p["source_id"], []).append("keyword")
    for p in random.Random(SEED_RANDOM).sample(prompts, RANDOM):
        drawn.setdefault(p["source_id"], []).append("random")
    by_id = {p["source_id"]: p for p in prompts}
    order = list(drawn)
    random.Random(SEED_SHUFFLE).shuffle(order)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "pool.jsonl", "w", encoding="utf-8") as pool, open(out / "key.jsonl", "w", encoding="utf-8") as key:
        for n, sid in enumerate(order):
            pool.write(json.dumps({"n": n, "text": by_id[sid]["text"]}) + "\n")
            key.write(json.dumps({"n": n, "source_id": sid, "drawn_by": drawn[sid]}) + "\n")
    print(f"{len(order)} prompts to label, of {len(prompts)}: {out / 'pool.jsonl'}")


def _rows(path: str) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def combine(key: str, a: str, b: str, exclude: list[str]) -> None:
    keys, la, lb = _rows(key), _rows(a), _rows(b)
    if not (len(keys) == len(la) == len(lb)) or any(
        k["n"] != x["n"] or k["n"] != y["n"] for k, x, y in zip(keys, la, lb)
    ):
        raise SystemExit("key and the two label files must list the same n in the same order")
    excluded = dict(e.split(":", 1) for e in exclude)
    texts = {p["source_id"]: p["text"] for p in first_turns()}
    out = SET_DIR / f"{NAME}.jsonl"
    with open(out, "w", encoding="utf-8") as fh:
        for k, x, y in sorted(zip(keys, la, lb), key=lambda r: r[0]["source_id"]):
            agreed = x["label"] == y["label"] and x["label"] != "none"
            row = {"source_id": k["source_id"], "scenario_id": f"Harmlessness/{x['label']}" if agreed else None}
            row["prompt_sha256"] = prompt_digest(texts[k["source_id"]])
            row.update(a=x["label"], b=y["label"], a_sure=x["sure"], b_sure=y["sure"], drawn_by=k["drawn_by"])
            if str(k["n"]) in excluded and agreed:
                row.update(scenario_id=None, excluded=excluded[str(k["n"])])
            fh.write(json.dumps(row) + "\n")
    print(f"wrote {out}")


def _share(k: int, n: int) -> dict:
    return {
        "k": k,
        "n": n,
        "share": round(k / n, 4) if n else None,
        "ci95": [round(v, 4) for v in clopper_pearson(k, n)],
    }


def measure() -> None:
    ls = load_label_set(NAME)
    rows = _rows(str(SET_DIR / f"{NAME}.jsonl"))
    harmful = [r["a"] != "none" and r["b"] != "none" and r["a"] == r["b"] for r in rows]
    by_id = {p["source_id"]: p["text"] for p in first_turns()}
    scores = p_harm([by_id[r["source_id"]] for r in rows])
    threshold = float(measurement()["threshold"])
    called = [i for i, s in enumerate(scores) if s >= threshold]
    rand = [i for i, r in enumerate(rows) if "random" in r["drawn_by"]]
    binary = [("harmful" if r["a"] != "none" else "none", "harmful" if r["b"] != "none" else "none") for r in rows]
    both = [r for r in rows if r["a"] != "none" and r["b"] != "none"]
    about = json.loads((SET_DIR / f"{NAME}.json").read_text(encoding="utf-8"))
    about["measured"] = {
        "reviewed": len(rows),
        "labelled": len(ls.labels),
        "excluded": {r["source_id"]: r["excluded"] for r in rows if r.get("excluded")},
        "by_scenario": {s: list(ls.labels.values()).count(s) for s in sorted(set(ls.labels.values()))},
        "annotators_harmful": {"a": sum(r["a"] != "none" for r in rows), "b": sum(r["b"] != "none" for r in rows)},
        "both_harmful": len(both),
        "same_category_when_both_harmful": sum(r["a"] == r["b"] for r in both),
        "cohen_kappa_harmful_vs_none": cohen_kappa(binary),
        "harmful_in_random_draw": _share(sum(harmful[i] for i in rand), len(rand)),
        "classifier_at_threshold": {
            "threshold": threshold,
            "note": "every prompt of the corpus at or above the threshold is in the pool (the top draw reaches below it)",
            "called_harmful": len(called),
            "precision": _share(sum(harmful[i] for i in called), len(called)),
            "recall_within_pool": _share(sum(harmful[i] for i in called), sum(harmful)),
        },
        "measured_with": "python bench/sharegpt_harm_labels.py measure",
    }
    (SET_DIR / f"{NAME}.json").write_text(json.dumps(about, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(about["measured"], indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("pool").add_argument("--out", type=Path, required=True)
    c = sub.add_parser("combine")
    c.add_argument("--key", required=True)
    c.add_argument("--a", required=True)
    c.add_argument("--b", required=True)
    c.add_argument("--exclude", action="append", default=[], help="N:reason (a pool line set aside)")
    sub.add_parser("measure")
    args = ap.parse_args()
    if args.cmd == "pool":
        make_pool(args.out)
    elif args.cmd == "combine":
        combine(args.key, args.a, args.b, args.exclude)
    else:
        measure()


if __name__ == "__main__":
    main()
