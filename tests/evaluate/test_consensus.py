"""``rmb audit --consensus``: label errors found by several RMs' disagreement with the label.

The known truth: a synthetic release with 5% of its labels flipped at random, scored by five synthetic
RMs of accuracies 0.65 to 0.80 with independent errors (each RM's margin on an item is the true label's
sign times a normal draw whose mean gives that accuracy); the flipped items must fill the top 10%.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import norm

from rmb_build.cli import main
from rmb_build.core.errors import RMBError
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.evaluate.consensus import consensus
from rmb_build.release import write_release
from rmb_build.release.read import Release

ACCURACIES = [0.65, 0.70, 0.72, 0.75, 0.80]


def synthetic(seed: int, n: int = 1000, flipped_share: float = 0.05):
    rng = np.random.default_rng(seed)
    flipped = set(rng.choice(n, size=int(n * flipped_share), replace=False).tolist())
    scenarios = ["Helpfulness/Chat/Discussion", "Harmlessness/S6"]
    evaluations = {}
    for r, acc in enumerate(ACCURACIES):
        rows = []
        for i in range(n):
            sign = -1.0 if i in flipped else 1.0
            m = sign * rng.normal(norm.ppf(acc), 1.0)
            rows.append({"set": "pairwise", "uid": str(i), "scenario": scenarios[i % 2], "outcome": float(m > 0),
                         "scores": {"chosen": m, "rejected": 0.0}})  # fmt: skip
        evaluations[f"rm{r}"] = rows
    return evaluations, {str(i) for i in flipped}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flipped_labels_rank_first(seed):
    evaluations, flipped = synthetic(seed)
    table = consensus(evaluations)
    top = {it["uid"] for it in table["items"][: len(table["items"]) // 10]}
    assert len(top & flipped) / len(flipped) >= 0.8
    rates = table["scenarios"]
    assert all(v["interval"][0] <= v["rate"] <= v["interval"][1] for v in rates.values())


def test_fewer_than_three_evaluations_are_refused():
    evaluations, _ = synthetic(0, n=20)
    with pytest.raises(RMBError, match="at least 3"):
        consensus(dict(list(evaluations.items())[:2]))


def test_cli_lists_items_and_writes_consensus(tmp_path, capsys):
    q = (Turn("user", "Tell me about cats."),)
    release = Release(name="c", root=None)
    for i in range(4):
        release.add(PairwiseItem(str(i), q, Answer("a", f"good {i}"), Answer("b", f"bad {i}"), "Harmlessness/S6"))
    write_release(release, tmp_path / "rel")
    folders = []
    for r, margins in enumerate([[1, -2, 1, 1], [1, -1, -1, 1], [1, -3, 1, 2]]):
        folder = tmp_path / f"eval{r}"
        folder.mkdir()
        rows = [{"set": "pairwise", "uid": str(i), "scenario": "Harmlessness/S6", "outcome": float(m > 0),
                 "scores": {"chosen": float(m), "rejected": 0.0}} for i, m in enumerate(margins)]  # fmt: skip
        (folder / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
        folders.append(str(folder))
    out = tmp_path / "audit.json"
    code = main(["audit", str(tmp_path / "rel"), "--no-embeddings", "--json", str(out), "--consensus", *folders])
    assert code == 0
    assert "3/3 contradict" in capsys.readouterr().out
    data = json.loads(out.read_text(encoding="utf-8"))["consensus"]
    assert data["items"][0]["uid"] == "1" and data["items"][0]["contradicting"] == 3
    assert data["scenarios"]["Harmlessness/S6"]["suspected"] == 1
