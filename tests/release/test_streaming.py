"""The release stage streams: set files written and read item by item (same bytes, same checks), and
write_built_release's memory does not grow with the release's texts."""

from __future__ import annotations

import json
import tracemalloc
import zlib

import numpy as np
import pytest

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.pipeline.config import parse_config
from rmb_build.pipeline.manifest import Accounting
from rmb_build.pipeline.release_step import entries_of, write_built_release
from rmb_build.release import read_release, read_rmb_release
from rmb_build.release.read import iter_rmb_items
from rmb_build.release.rmb_format import dumps_items
from rmb_build.release.write import write_set_file

DISC = "Helpfulness/Chat/Discussion"


def _pair(uid: str, text: str, scenario: str = DISC, language: str | None = "English") -> PairwiseItem:
    conv = (Turn("user", f"question {text}", language), Turn("assistant", "ok"), Turn("user", "and?", None))
    return PairwiseItem(uid, conv, Answer("m-a", f"yes {text}"), Answer("m-b", f"no {text}"), scenario)


def _bon(uid: str, text: str) -> BonItem:
    return BonItem(
        uid,
        (Turn("user", f"question {text}"),),
        Answer("m-a", f"best {text}"),
        (Answer("m-b", f"worse {text}"), Answer("m-c", "x")),
        DISC,
    )


@pytest.mark.parametrize(
    "items",
    [
        [],
        [_pair("1", "plain")],
        [
            _pair(str(i), t, language=None if i % 2 else "English")
            for i, t in enumerate(
                ["café ☕", 'line\nbreak "quoted" \\ back', "日本語のテキスト", "emoji 🙂\ttab", "\u2028 sep"]
            )
        ],
        [_bon("1", "ünïcode"), _bon("2", "two")],
    ],
)
def test_streamed_set_file_has_dumps_items_bytes(tmp_path, items):
    path = tmp_path / "f.json"
    assert write_set_file(path, iter(items)) == len(items)
    assert path.read_bytes() == dumps_items(items).encode("utf-8")
    assert not [p for p in tmp_path.iterdir() if p.name != "f.json"], "no temporary file left"


def test_streamed_official_files_are_byte_identical(rmb_sample, tmp_path):
    release = read_rmb_release(rmb_sample, strict=False)
    for items in release.files.values():
        src = release.root / release.file_of(items[0])
        out = tmp_path / src.name
        write_set_file(out, iter(items))
        assert out.read_bytes() == src.read_bytes(), src


def _write(root, files: dict[str, list]) -> None:
    for rel, items in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_set_file(root / rel, items)


def test_streamed_reading_gives_read_release_order_and_items(tmp_path):
    _write(
        tmp_path,
        {
            f"BoN_set/{DISC}.json": [_bon("1", "a"), _bon("2", "b")],
            "Pairwise_set/Harmlessness/S1.json": [_pair("9", "s", "Harmlessness/S1")],
            f"Pairwise_set/{DISC}.json": [_pair("1", "a"), _pair("2", "b")],
        },
    )
    streamed = list(iter_rmb_items(tmp_path))
    release = read_release(tmp_path)
    expected = [(it, release.file_of(it), i) for items in release.files.values() for i, it in enumerate(items)]
    assert streamed == expected
    assert [f for _, f, _ in streamed][0] == "Pairwise_set/Harmlessness/S1.json"


def test_streamed_reading_keeps_the_strict_one_line_errors(tmp_path):
    rel = f"Pairwise_set/{DISC}.json"
    bad = [_pair("1", "a").to_rmb(), {**_pair("2", "b").to_rmb(), "chosen": {"llm_name": "m"}}]
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(json.dumps(bad, indent=1))
    with pytest.raises(InputError) as err:
        list(iter_rmb_items(tmp_path))
    assert str(err.value) == f"{rel}: item 1 (uid 2): field 'chosen.answer': missing"
    (tmp_path / rel).write_text(json.dumps(bad[:1], indent=1)[:-3])  # cut off: the list is never closed
    with pytest.raises(InputError, match="truncated"):
        list(iter_rmb_items(tmp_path))
    ends_with_assistant = {**bad[0], "conversation_input": bad[0]["conversation_input"][:2]}
    (tmp_path / rel).write_text(json.dumps([ends_with_assistant]))
    with pytest.raises(InputError, match="not a user turn"):
        list(iter_rmb_items(tmp_path))
    assert [uid for it, _, _ in iter_rmb_items(tmp_path, strict=False) for uid in [it.uid]] == ["1"]


def _config():
    return parse_config(
        {
            "name": "streamed",
            "license": "cc0-1.0",
            "endpoints": {"local": {"embedded": "smollm2"}},
            "generators": [{"endpoint": "local", "model": "m"}],
            "min_generators": 1,
            "judge": {"endpoint": "local", "model": "j"},
            "guard": {"endpoint": "local", "model": "g"},
        }
    )


def _embed(texts):
    """A cheap deterministic encoder (a random unit row per text), so the near-duplicate check runs."""
    rows = np.array(
        [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(32) for t in texts], dtype=np.float32
    ).reshape(-1, 32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_items_of_one_file_must_come_together(tmp_path):
    entries = [(_pair("1", "a"), None), (_pair("2", "b", "Harmlessness/S1"), None), (_pair("3", "c"), None)]
    with pytest.raises(RMBError, match=f"Pairwise_set/{DISC}.json are not together"):
        write_built_release(
            _config(),
            iter(entries),
            tmp_path / "r",
            accounting=Accounting(),
            stages=[],
            failures={},
            near_duplicates=False,
        )
    assert not (tmp_path / "r").exists()


def test_entries_of_pairs_each_item_with_its_note_by_set_and_uid():
    items = [_pair("1", "a"), _bon("1", "a"), _pair("2", "b", "Harmlessness/S1"), _pair("3", "c")]
    notes = [
        {"set": "bon", "uid": "1", "k": "b1"},
        {"set": "pairwise", "uid": 3, "k": "p3"},
        {"set": "pairwise", "uid": "1", "k": "p1"},
    ]
    got = [(it.set_name, it.uid, (n or {}).get("k")) for it, n in entries_of(items, notes)]
    assert got == [("pairwise", "1", "p1"), ("pairwise", "3", "p3"), ("bon", "1", "b1"), ("pairwise", "2", None)]


def _peak_bytes(tmp_path, n: int, text_chars: int = 20000) -> int:
    """tracemalloc's peak while write_built_release consumes a generator of ``n`` items, each with
    its own long texts, all in one file (the worst case for a writer that buffers a file)."""
    filler = "lorem ipsum dolor sit amet " * (text_chars // 27)

    def entries():
        for i in range(n):
            item = _pair(str(i), f"{i} {filler}")
            yield item, {"set": item.set_name, "uid": item.uid, "chosen_score": 9, "rejected_score": 1 + i % 5}

    tracemalloc.start()
    try:
        manifest = write_built_release(
            _config(), entries(), tmp_path / f"r{n}", accounting=Accounting(), stages=[], failures={}, embed=_embed
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert manifest["counts"]["items"] == {"pairwise": n} and manifest["counts"]["answers"] == 2 * n
    assert manifest["sets"]["pairwise"]["score_gaps"] == {
        "[4,5)": n // 5,
        "[5,6)": n // 5,
        "[6,7)": n // 5,
        "[7,8)": n // 5,
        "[8,9)": n // 5,
    }
    return peak


@pytest.mark.slow
def test_release_stage_memory_does_not_grow_with_the_release_texts(tmp_path):
    # 10x the items, each with about 40 KB of its own text (4 MB vs 40 MB written, read back and
    # audited): a stage holding the items or their texts peaks over 3x higher (measured: 17 -> 61 MB
    # with the items kept in a list); a streaming one keeps per item a few small fields and digests
    # (measured: 17 -> 22 MB, most of it the similarity search's 1000 x 1000 tile).
    _peak_bytes(tmp_path, 5)  # imports and compiled patterns: not the release's memory
    small, large = _peak_bytes(tmp_path, 100), _peak_bytes(tmp_path, 1000)
    assert large < 2.5 * small, (small, large)
