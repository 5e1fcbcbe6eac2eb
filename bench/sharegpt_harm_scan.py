"""How many harmful prompts the shipped ShareGPT copy holds, as the build's harm rule sees them.

Reads every ShareGPT record whose first turn is a user prompt of 15-600 characters, mostly ASCII (the
demo's gather keeps single-turn English prompts of that size), scores it with the default embedding
classifier's P(harm) (``rmb_build.stages.harm_evidence``), and prints how many reach each threshold,
the prevalence of harmful prompts that the measured recall and false-positive rate imply
(Rogan-Gladen: (called - fpr) / (recall - fpr)), the precision that prevalence gives at the shipped
threshold, and the top prompts for a reader to judge.

Usage: python bench/sharegpt_harm_scan.py [--top 40] [--out scan.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from rmb_build.core.json_array import ArrayTail, iter_json_array
from rmb_build.core.records import Turn
from rmb_build.core.taxonomy import HARMLESSNESS, parse_scenario_id
from rmb_build.stages.classify import classifier_text, embedding_classifier
from rmb_build.stages.harm_evidence import measurement
from rmb_build.stages.sources.sharegpt import packaged_sharegpt


def prompts() -> tuple[list[str], ArrayTail]:
    texts, tail = [], ArrayTail()
    with packaged_sharegpt() as path:
        for _, rec in iter_json_array(path, tail):
            turns = rec.get("conversations") or []
            if not turns or turns[0].get("from") != "human":
                continue
            text = (turns[0].get("value") or "").strip()
            if 15 <= len(text) <= 600 and sum(c.isascii() for c in text) >= 0.95 * len(text):
                texts.append(text)
    return texts, tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out")
    args = ap.parse_args()
    texts, tail = prompts()
    clf = embedding_classifier(None, backend="onnx")
    proba = clf.predict_proba([classifier_text((Turn("user", t),)) for t in texts])
    harm_cols = np.array([parse_scenario_id(label).goal == HARMLESSNESS for label in clf.labels])
    p_harm = proba[:, harm_cols].sum(axis=1)
    m = measurement()["default_classifier"]["p_harm"]
    threshold = m["threshold"]
    called = float((p_harm >= threshold).mean())
    prevalence = max(0.0, (called - m["fpr"]) / (m["recall"] - m["fpr"]))
    tp, fp = m["recall"] * prevalence, m["fpr"] * (1 - prevalence)
    out = {
        "prompts": len(texts),
        "incomplete_tail_chars": tail.incomplete_chars,
        "at_or_above": {f"{t:.2f}": int((p_harm >= t).sum()) for t in (0.5, 0.6, 0.7, 0.8, 0.9)},
        "threshold": threshold,
        "called_harmful_share": round(called, 4),
        "implied_prevalence": round(prevalence, 4),
        "implied_precision_at_threshold": round(tp / (tp + fp), 3) if tp + fp else None,
        "top": [
            {"p_harm": round(float(p_harm[k]), 3), "prompt": texts[k][:200]} for k in np.argsort(-p_harm)[: args.top]
        ],
    }
    print(json.dumps({k: v for k, v in out.items() if k != "top"}, indent=1))
    for row in out["top"]:
        print(f"{row['p_harm']:.2f}  {row['prompt'][:150]!r}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
