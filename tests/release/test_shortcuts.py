"""``rmb audit --shortcuts``: trivial scorers per subset against chance, exact p, Holm's correction.

The known truths: a release whose longer answer always wins is flagged in every subset; one whose lengths
(and every other trait a scorer reads) are drawn independently of the label is flagged at most once in
20 seeded draws; the exact tail probabilities equal scipy's binomial and a brute-force Poisson-binomial.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.stats import binom

from rmb_build.cli import main
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.audit.report import AuditReport
from rmb_build.release.audit.shortcuts import SCORERS, at_least, holm, shortcut_table
from rmb_build.release.card.contents import audit_section
from rmb_build.release.read import Release

PAIR_SCENARIOS = ["Helpfulness/Chat/Discussion", "Helpfulness/Code/Documentation", "Harmlessness/S6"]
BON_SCENARIO = "Helpfulness/Chat/Discussion"
PER_SCENARIO = 30
WORDS = ["alpha", "beta", "gamma", "delta", "answer", "cats", "- item", "**bold**", "# head", "I cannot"]


def _text(rng: np.random.Generator, length: int) -> str:
    """Words drawn at random (Markdown marks, list items, a refusal opener among them): traits independent
    of anything but the draw."""
    return " ".join(rng.choice(WORDS, size=length)) + "\n" * int(rng.integers(0, 2)) + "- x" * int(rng.integers(0, 2))


def synthetic(seed: int, longer_wins: bool) -> Release:
    rng = np.random.default_rng(seed)
    release = Release(name=f"synthetic-{seed}", root=None)

    def pair_texts(n: int) -> list[str]:
        lengths = rng.integers(3, 40, size=n)
        if longer_wins:  # distinct lengths, the longest first (the labelled-better answer)
            lengths = np.sort(rng.choice(np.arange(3, 60), size=n, replace=False))[::-1]
        return [_text(rng, int(k)) for k in lengths]

    for scenario in PAIR_SCENARIOS:
        for k in range(PER_SCENARIO):
            q = (Turn("user", f"Tell me about {' '.join(rng.choice(WORDS, size=3))} {k}?"),)
            good, bad = pair_texts(2)
            release.add(PairwiseItem(f"{scenario}-{k}", q, Answer("m", good), Answer("n", bad), scenario))
    for k in range(PER_SCENARIO):
        q = (Turn("user", f"Question {k} about {rng.choice(WORDS)}?"),)
        best, *losers = pair_texts(4)
        release.add(BonItem(f"bon-{k}", q, Answer("m", best), tuple(Answer("n", t) for t in losers), BON_SCENARIO))
    return release


def test_longer_always_wins_flags_every_subset():
    table = shortcut_table(synthetic(0, longer_wins=True).items())
    longer = [r for r in table["rows"] if r["scorer"] == "longer"]
    assert len(longer) == len(PAIR_SCENARIOS) + 1
    assert all(r["flagged"] and r["accuracy"] == 1.0 for r in longer)
    assert {r["chance"] for r in longer} == {0.5, 0.25}
    assert table["correction"] == "holm" and table["tests"] == len(longer) * len(SCORERS)


def test_lengths_independent_of_the_label_are_not_flagged():
    flags = sum(shortcut_table(synthetic(seed, longer_wins=False).items())["flagged"] for seed in range(20))
    assert flags <= 1


def test_exact_tail_and_holm():
    assert at_least(7, [0.5] * 10) == pytest.approx(binom.sf(6, 10, 0.5))
    chances = [0.5, 0.25, 0.25, 1 / 3, 0.5]
    brute = sum(
        np.prod([p if w else 1 - p for p, w in zip(chances, wins)])
        for wins in itertools.product([0, 1], repeat=len(chances))
        if sum(wins) >= 3
    )
    assert at_least(3, chances) == pytest.approx(brute)
    assert at_least(0, chances) == 1.0 and at_least(6, chances) == 0.0
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])


def test_cli_writes_the_table_to_json_report_and_card(tmp_path, capsys):
    folder = tmp_path / "rel"
    write_release(synthetic(1, longer_wins=True), folder)
    out = tmp_path / "audit.json"
    assert main(["audit", str(folder), "--no-embeddings", "--shortcuts", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "shortcuts: " in printed and "FLAG" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert {"counts", "defects", "shortcuts"} <= set(data)  # a new key; the others as before
    assert all(r["flagged"] for r in data["shortcuts"]["rows"] if r["scorer"] == "longer")
    card = audit_section(AuditReport.from_json(data))
    assert "Shortcuts (`rmb audit --shortcuts`)" in card and "longer" in card


def test_without_the_flag_the_audit_json_has_no_shortcuts(tmp_path):
    folder = tmp_path / "rel"
    write_release(synthetic(2, longer_wins=True), folder)
    out = tmp_path / "audit.json"
    assert main(["audit", str(folder), "--no-embeddings", "--json", str(out)]) == 0
    assert "shortcuts" not in json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow  # the official sample's 2,000-odd items: ~15 s
def test_official_sample_prints_the_table(rmb_sample, capsys, tmp_path):
    out = tmp_path / "audit.json"
    assert main(["audit", str(rmb_sample), "--no-embeddings", "--shortcuts", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "shortcuts: " in printed and "Helpfulness/Chat/Discussion" in printed
    rows = json.loads(out.read_text(encoding="utf-8"))["shortcuts"]["rows"]
    assert {r["scorer"] for r in rows} == set(SCORERS)
