"""A small release with a ``Style_set/`` (INTERFACES.md's record shape) whose texts score as the test says:
an answer ``"3.5|text"`` scores 3.5 under ``formats_helpers.SCORER``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from formats_helpers import ans

from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release

SCENARIOS = ("Helpfulness/Chat/Discussion", "Helpfulness/Code/Documentation", "Harmlessness/S6")
STYLES = ("concise", "detailed_plain", "detailed_markdown")


def style_records(rng: np.random.Generator, per_scenario: int = 6) -> dict[str, list[dict]]:
    """Per scenario, records whose six scores are small random integers (so ties occur), as RM-Bench's
    ``compute_accuracy`` reads them: ``score_chosen`` and ``score_rejected`` beside the texts."""
    out: dict[str, list[dict]] = {}
    uid = 0
    for scenario in SCENARIOS:
        recs = []
        for _ in range(per_scenario):
            prompt = f"Question {uid} in {scenario}?"
            rec = {"id": str(uid), "prompt": prompt, "conversation_input": [{"content": prompt, "role": "user"}]}
            for side in ("chosen", "rejected"):
                scores = [float(x) for x in rng.integers(0, 4, size=3)]
                rec[side] = [ans(v, f"{side} {uid} {s}") for v, s in zip(scores, STYLES)]
                rec[f"score_{side}"] = scores
            rec["scenario"] = scenario
            recs.append(rec)
            uid += 1
        out[scenario] = recs
    return out


def write_style_release(root: Path, records: dict[str, list[dict]]) -> Path:
    """RMB's two sets (one pairwise item per style record, same uid) and ``Style_set/`` holding ``records``
    (without their ``score_*`` keys)."""
    rel = Release(name="style-small", root=None)
    for scenario, recs in records.items():
        for r in recs:
            turns = tuple(Turn(t["role"], t["content"]) for t in r["conversation_input"])
            rel.add(
                PairwiseItem(r["id"], turns, Answer("m1", r["chosen"][0]), Answer("m2", r["rejected"][0]), scenario)
            )
    write_release(rel, root)
    for scenario, recs in records.items():
        write_style_file(root, scenario, recs)
    return root


def write_style_file(root: Path, scenario: str, recs: list[dict]) -> Path:
    """``Style_set/<scenario>.json`` holding ``recs`` (without their ``score_*`` keys)."""
    path = root / "Style_set" / f"{scenario}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = [{k: v for k, v in r.items() if not k.startswith("score_")} for r in recs]
    path.write_text(json.dumps(clean, indent=1, ensure_ascii=False), encoding="utf-8")
    return path
