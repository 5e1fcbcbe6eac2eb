"""Outputs are whole or absent, and the machine's failures are one line: every command that writes a folder
(audit --fix, publish, evaluate, leaderboard, downstream, review export) leaves it absent or as it was when
the disk fills; an earlier output is replaced as a whole and anything else refused; a damaged SQLite cache,
a path through a file, a read-only place, a reader that leaves (``| head``) and a malformed Label Studio
export give one line (or none), never a traceback."""

from __future__ import annotations

import errno
import json
import os
import random
import resource
import stat
import string
import subprocess
import sys
from pathlib import Path

import pytest
from leaderboard_helpers import SCORER, evaluate_all
from leaderboard_helpers import small_release as scored_release
from review_helpers import small_release
from stub_endpoint import StubEndpoint

from rmb_build.cli import main
from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.release import write_release
from rmb_build.release.read import Release, read_rmb_release
from rmb_build.release.review_labels import Label
from rmb_build.review.session import Settings, open_session
from rmb_build.review.store import ReviewStore
from tests.analysis.downstream.test_downstream import policy_reply, write_config

NO_SPACE = os.strerror(errno.ENOSPC)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def leftovers(parent: Path) -> list[str]:
    """Temporary files or folders left beside (or anywhere under) ``parent``."""
    return [str(p) for p in parent.rglob(".*") if ".tmp" in p.name]


@pytest.fixture
def disk_full(monkeypatch):
    """``disk_full(n)``: from the (n+1)-th fsync on, the disk is full (fsync is where a full disk shows on
    file systems that allocate late, and every file this toolkit keeps is fsynced)."""
    real = os.fsync

    def arm(after: int) -> None:
        calls = []

        def fsync(fd):
            calls.append(fd)
            if len(calls) > after:
                raise OSError(errno.ENOSPC, NO_SPACE)
            return real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    return arm


def one_line(capsys, *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# ---------------------------------------------------------------------------------------------------
# a full disk: absent, or the earlier output byte for byte


def test_audit_fix_on_a_full_disk_writes_no_half_release(tmp_path, disk_full, capsys):
    rel = small_release(tmp_path / "rel")
    out = tmp_path / "fixed"
    disk_full(3)  # the fourth file fails: the old code left three set files that read as a release
    assert main(["audit", str(rel), "--fix", str(out), "--no-embeddings"]) == 2
    one_line(capsys, f"--fix {out}", NO_SPACE, "nothing was written")
    assert not out.exists() and not leftovers(tmp_path)


def test_a_stopped_audit_fix_leaves_no_half_release(tmp_path, monkeypatch, capsys):
    rel = small_release(tmp_path / "rel")
    out = tmp_path / "fixed"
    real, calls = os.fsync, []

    def fsync(fd):  # Ctrl-C (or SIGTERM, which the CLI turns into it) after three files
        calls.append(fd)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert main(["audit", str(rel), "--fix", str(out), "--no-embeddings"]) == 130
    assert not out.exists() and not leftovers(tmp_path)


def _big_release(root: Path) -> Path:
    rel = Release(name="big", root=None)
    q = (Turn("user", "Tell me a long story.", "en"),)
    rel.add(PairwiseItem("0", q, Answer("a", "Short and fine."), Answer("b", "No."), "Helpfulness/Chat/Discussion"))
    story = "".join(random.Random(0).choices(string.ascii_letters + " ", k=200_000))  # no compression shrinks it
    rel.add(PairwiseItem("1", q, Answer("a", story), Answer("b", "No."), "Helpfulness/Code/Documentation"))
    write_release(rel, root)
    return root


def test_audit_fix_past_the_file_size_limit_is_one_line_and_no_folder(tmp_path):
    """A real write that the kernel refuses half-way (RLIMIT_FSIZE: EFBIG, as root too), in a real process."""
    rel = _big_release(tmp_path / "rel")
    out = tmp_path / "fixed"
    limit = 64 * 1024  # the story's file is 200 KB, the other one 1 KB

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "rmb_build.cli", "audit", str(rel), "--fix", str(out), "--no-embeddings"],
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"--fix {out}" in proc.stderr and os.strerror(errno.EFBIG) in proc.stderr
    assert not out.exists() and not leftovers(tmp_path)


def _publish(release: Path, out: Path) -> int:
    return main(
        ["publish", str(release), "--repo-id", "me/demo", "--dry-run", "--out", str(out), "--no-embeddings"]
        + ["--license", "cc-by-4.0"]
    )


@pytest.mark.torch
def test_publish_into_an_earlier_out_on_a_full_disk_keeps_it_whole(tmp_path, disk_full, capsys):
    out = tmp_path / "hf"
    assert _publish(small_release(tmp_path / "rel"), out) == 0
    before = snapshot(out)
    assert {"README.md", "pairwise/test-00000-of-00001.parquet", "bon/test-00000-of-00001.parquet"} <= set(before)
    capsys.readouterr()
    other = small_release(tmp_path / "rel2", per_cell=2)
    disk_full(0)  # the shards are written, the card is not: the old code mixed new shards with the old card
    assert _publish(other, out) == 2
    one_line(capsys, f"--out {out}", NO_SPACE, "it is as it was")
    assert snapshot(out) == before and not leftovers(tmp_path)


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_publish_whose_shard_write_fails_leaves_no_tmp_shard(tmp_path, capsys):
    """The shard itself fails half-way (the kernel's file-size limit, in a real process): no ``.tmp`` shard
    is left in the earlier --out, which stays byte for byte."""
    out = tmp_path / "hf"
    assert _publish(small_release(tmp_path / "rel"), out) == 0
    before = snapshot(out)
    big = _big_release(tmp_path / "big")
    limit = 64 * 1024

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "rmb_build.cli", "publish", str(big), "--repo-id", "me/demo", "--dry-run"]
        + ["--out", str(out), "--no-embeddings", "--license", "cc-by-4.0"],
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=180,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"--out {out}" in proc.stderr and os.strerror(errno.EFBIG) in proc.stderr
    assert snapshot(out) == before and not leftovers(tmp_path)


def _evaluate(release: Path, out: Path, cache: Path, *extra: str) -> int:
    return main(
        ["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(out), "--cache", str(cache)]
        + ["--bootstrap", "50", "--no-progress", *extra]
    )


def test_evaluate_overwrite_on_a_full_disk_keeps_the_earlier_results(tmp_path, disk_full, capsys):
    rel, out, cache = small_release(tmp_path / "rel"), tmp_path / "eval", tmp_path / "cache"
    assert _evaluate(rel, out, cache) == 0
    before = snapshot(out)
    capsys.readouterr()
    disk_full(1)
    assert _evaluate(rel, out, cache, "--overwrite") == 2
    one_line(capsys, f"--out {out}", NO_SPACE, "it is as it was")
    assert snapshot(out) == before and not leftovers(tmp_path)


def test_evaluate_overwrite_replaces_an_evaluation_but_never_a_users_files(tmp_path, capsys):
    rel, out, cache = small_release(tmp_path / "rel"), tmp_path / "eval", tmp_path / "cache"
    assert _evaluate(rel, out, cache) == 0
    (out / "stale.png").write_bytes(b"not ours")
    assert _evaluate(rel, out, cache, "--overwrite") == 2
    one_line(capsys, f"--out {out}", "stale.png", "choose an empty folder")
    (out / "stale.png").unlink()
    (out / "heatmap.png").write_bytes(b"an earlier run's heatmap")
    (out / "predictions.jsonl").unlink()  # an earlier output, part of it gone: still ours
    assert _evaluate(rel, out, cache, "--overwrite") == 0
    assert (out / "predictions.jsonl").is_file() and (out / "heatmap.png").read_bytes() != b"an earlier run's heatmap"


def test_a_cache_made_under_out_and_the_current_folder_are_never_swapped_away(tmp_path, monkeypatch, capsys):
    rel, out = small_release(tmp_path / "rel"), tmp_path / "eval"
    assert _evaluate(rel, out, out / "cache") == 2  # the cache appeared under --out while scoring
    one_line(capsys, f"--out {out}", "holds cache")
    assert (out / "cache" / "scores.sqlite").is_file() and not leftovers(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert _evaluate(rel, Path("."), tmp_path / "cache") == 2
    one_line(capsys, "--out .", "current folder")
    assert list(here.iterdir()) == []


def test_leaderboard_replaces_an_earlier_site_whole_and_refuses_other_folders(tmp_path, capsys):
    rel = scored_release(tmp_path / "rel")
    folders = evaluate_all(rel, tmp_path, ["baseline:length", "baseline:random"])
    site = tmp_path / "site"
    args = ["leaderboard", "--out", str(site), "--resamples", "200"]
    assert main([*args, *map(str, folders)]) == 0
    pages = sorted(p.name for p in (site / "rm").glob("*.html"))
    assert len(pages) == 2
    assert main([*args, str(folders[0])]) == 0  # one RM now: the other's page must not linger
    assert len(list((site / "rm").glob("*.html"))) == 1
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    capsys.readouterr()
    assert main(["leaderboard", "--out", str(mine), str(folders[0])]) == 2
    one_line(capsys, f"--out {mine}", "notes.txt")
    assert snapshot(mine) == {"notes.txt": b"keep me"}


def test_downstream_refuses_a_foreign_out_before_any_call_and_keeps_its_output_on_a_full_disk(
    tmp_path, disk_full, capsys
):
    scorer = tmp_path / "scorer.py"
    rel = scored_release(tmp_path / "rel")
    scorer.write_text(SCORER)
    folders = evaluate_all(rel, tmp_path, [f"python:{scorer}:longest", "baseline:random"])
    with StubEndpoint(reply=policy_reply) as stub:
        config = write_config(tmp_path, stub, folders)
        args = ["downstream", "--config", str(config), "--workdir", str(tmp_path / "work"), "--no-progress"]
        mine = tmp_path / "mine"
        mine.mkdir()
        (mine / "notes.txt").write_text("keep me")
        capsys.readouterr()
        assert main([*args, "--out", str(mine)]) == 2
        one_line(capsys, f"--out {mine}", "notes.txt")
        assert stub.count("generate") == 0 and snapshot(mine) == {"notes.txt": b"keep me"}
        out = tmp_path / "check"
        assert main([*args, "--out", str(out)]) == 0
        before = snapshot(out)
        capsys.readouterr()
        disk_full(0)
        assert main([*args, "--out", str(out)]) == 2
    one_line(capsys, f"--out {out}", NO_SPACE)
    assert snapshot(out) == before and not leftovers(tmp_path)


def test_a_second_review_export_after_an_undo_leaves_no_stale_gold(tmp_path, capsys):
    rel_dir = small_release(tmp_path / "rel")
    db = tmp_path / "review.db"
    page, _ = open_session(
        str(db), read_rmb_release(rel_dir), str(rel_dir), Settings(["ann", "bob"], None, 1.0, 0), require_token=False
    )
    for who in ("ann", "bob"):
        page.store.save(Label("pairwise", "1", who, "chosen", (), "", "", None))
    out = tmp_path / "review"
    export = ["review", "export", "--db", str(db), "--out", str(out)]
    assert main(export) == 0
    assert (out / "gold").is_dir()
    page.store.undo("bob")
    page.store.close()
    assert main(export) == 0
    assert "no gold release" in capsys.readouterr().out
    assert not (out / "gold").exists()  # judge-check --gold would have used the stale one
    assert sorted(p.name for p in out.iterdir()) == ["agreement.json", "agreement.md", "labels.jsonl", "unjudged.jsonl"]
    (out / "notes.txt").write_text("mine")
    assert main(export) == 2
    one_line(capsys, f"--out {out}", "notes.txt")


# ---------------------------------------------------------------------------------------------------
# places that cannot be written, as root too


def test_an_out_path_through_a_file_is_one_line(tmp_path, capsys):
    rel = small_release(tmp_path / "rel")
    (tmp_path / "file.txt").write_text("a file")
    out = tmp_path / "file.txt" / "eval"
    assert _evaluate(rel, out, tmp_path / "cache") == 2
    one_line(capsys, f"--out {out}", os.strerror(errno.ENOTDIR))


def test_a_read_only_place_is_one_line(tmp_path, monkeypatch, capsys):
    """Root writes through permission bits and no file system can be mounted read-only here: creating a
    folder or file in a read-only mount is simulated (what the kernel answers there: EROFS)."""
    rel = small_release(tmp_path / "rel")
    ro = tmp_path / "ro"
    ro.mkdir()
    real_mkdir, real_open = os.mkdir, os.open

    def refuse(path):
        if Path(path).parent == ro:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def mkdir(path, *args, **kwargs):
        refuse(path)
        return real_mkdir(path, *args, **kwargs)

    def open_(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            refuse(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)
    assert main(["audit", str(rel), "--fix", str(ro / "fixed"), "--no-embeddings"]) == 2
    one_line(capsys, f"--fix {ro / 'fixed'}", os.strerror(errno.EROFS))
    assert main(["audit", str(rel), "--no-embeddings", "--json", str(ro / "audit.json")]) == 2
    one_line(capsys, str(ro / "audit.json"), os.strerror(errno.EROFS))
    assert list(ro.iterdir()) == []


def test_a_json_report_into_a_pipe_or_onto_a_folder(tmp_path, capsys):
    """``--json /dev/stdout`` and the like: a pipe is written in place (the old code renamed a regular
    file over it: as root, over /dev/stdout itself); a folder where the file goes is one line."""
    rel = small_release(tmp_path / "rel")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that the writer's open does not wait
    try:
        assert main(["audit", str(rel), "--no-embeddings", "--json", str(fifo)]) == 0
        report = json.loads(os.read(reader, 1 << 16))
    finally:
        os.close(reader)
    assert "counts" in report and stat.S_ISFIFO(os.stat(fifo).st_mode) and not leftovers(tmp_path)
    (tmp_path / "adir").mkdir()
    capsys.readouterr()
    assert main(["audit", str(rel), "--no-embeddings", "--json", str(tmp_path / "adir")]) == 2
    one_line(capsys, str(tmp_path / "adir"), os.strerror(errno.EISDIR))
    assert not leftovers(tmp_path)


# ---------------------------------------------------------------------------------------------------
# damaged SQLite files


def _damage(db: Path) -> None:
    """Garbage over the file's second page (the scores table's): 'database disk image is malformed'."""
    with open(db, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xa5" * 4096)


def test_a_damaged_score_cache_is_one_line_saying_how_to_recover(tmp_path, capsys):
    rel, cache = small_release(tmp_path / "rel"), tmp_path / "cache"
    assert _evaluate(rel, tmp_path / "a", cache) == 0
    _damage(cache / "scores.sqlite")
    capsys.readouterr()
    assert _evaluate(rel, tmp_path / "b", cache) == 2
    one_line(capsys, str(cache / "scores.sqlite"), "damaged", "malformed", "delete it")
    assert not (tmp_path / "b").exists() and not leftovers(tmp_path)


def test_a_damaged_llm_cache_is_one_line(tmp_path, capsys):
    from rmb_build.llm.cache import ResponseCache

    with ResponseCache(tmp_path / "llm") as cache:
        for i in range(50):
            cache.put(f"k{i}", {"text": "x" * 200}, endpoint="e", model="m")
    _damage(tmp_path / "llm" / "responses.sqlite")
    assert main(["cache", "stats", "--cache", str(tmp_path / "llm")]) == 2
    one_line(capsys, "responses.sqlite", "damaged", "delete it")
    (tmp_path / "llm" / "responses.sqlite").write_bytes(b"not SQLite at all" * 100)
    assert main(["cache", "stats", "--cache", str(tmp_path / "llm")]) == 2
    one_line(capsys, "responses.sqlite", "not a database")


def test_a_damaged_review_db_is_one_line_that_says_keep_it(tmp_path, capsys):
    rel_dir = small_release(tmp_path / "rel")
    db = tmp_path / "review.db"
    page, _ = open_session(
        str(db), read_rmb_release(rel_dir), str(rel_dir), Settings(["ann"], None, None, 0), require_token=False
    )
    page.store.close()
    _damage(db)
    assert main(["review", "export", "--db", str(db), "--out", str(tmp_path / "out")]) == 2
    one_line(capsys, str(db), "damaged", "restore it from a backup")
    assert not (tmp_path / "out").exists()


def test_a_full_disk_under_the_score_cache_is_one_line(tmp_path):
    """SQLite's own 'database or disk is full' (a page limit stands in for the disk: SQLITE_FULL either way)."""
    from rmb_build.core.errors import RMBError
    from rmb_build.evaluate.cache import ScoreCache

    with ScoreCache(tmp_path / "cache") as cache:
        cache.db.execute("PRAGMA max_page_count = 8")
        with pytest.raises(RMBError, match=r"scores\.sqlite: disk full \(database or disk is full\)"):
            cache.put_many("fp", {f"key {i}": float(i) for i in range(5000)})
        assert cache.count("fp") == 0  # the batch was rolled back whole


# ---------------------------------------------------------------------------------------------------
# a reader that goes away


def test_a_reader_that_leaves_ends_the_command_quietly(tmp_path):
    rel = small_release(tmp_path / "rel")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmb_build.cli", "audit", str(rel), "--no-embeddings"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # `| head -0`: the reader is gone before the first line
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err == b""


# ---------------------------------------------------------------------------------------------------
# a malformed Label Studio export


@pytest.fixture
def ls_review(tmp_path):
    """A planned review, its Label Studio tasks, and a valid export of the first task (one label)."""
    rel_dir = small_release(tmp_path / "rel")
    db = tmp_path / "review.db"
    open_session(str(db), read_rmb_release(rel_dir), str(rel_dir), Settings(["ann"], 6, None, 0), require_token=False)[
        0
    ].store.close()
    assert main(["review", "export", "--db", str(db), "--out", str(tmp_path / "ls"), "--format", "label-studio"]) == 0
    task = json.loads((tmp_path / "ls" / "tasks.json").read_text())[0]
    annotation = {
        "completed_by": 7,
        "lead_time": 3.0,
        "updated_at": "2026-01-01T10:00:00Z",
        "result": [
            {"from_name": "preference", "type": "pairwise", "value": {"selected": "left"}},
            {"from_name": "flags", "type": "choices", "value": {"choices": ["answer cut off"]}},
            {"from_name": "note", "type": "textarea", "value": {"text": ["hm"]}},
        ],
    }
    return db, {"id": 1, "data": task["data"], "annotations": [annotation]}


def _set(obj, path: str, value):
    *head, last = path.split(".")
    for key in head:
        obj = obj[int(key)] if isinstance(obj, list) else obj[key]
    if value is KeyError:
        del obj[last]
    elif isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


HOSTILE_EXPORTS = [
    ("data", "a string", "data"),
    ("data.rmb_uid", KeyError, "data.rmb_uid"),
    ("data.rmb_uid", "999", "data.rmb_uid"),  # not an item of the release: the old code took it
    ("data.rmb_uid", ["1"], "data.rmb_uid"),
    ("data.rmb_order", ["a", 1], "data"),
    ("annotations", {"0": {}}, "annotations"),
    ("annotations.0", 5, "annotations[0]"),
    ("annotations.0.result", "left", "annotations[0].result"),
    ("annotations.0.result.0", "x", "annotations[0].result[0]"),
    ("annotations.0.result.0.value", "left", "annotations[0].result[0].value"),
    ("annotations.0.result.1.value.choices", "answer cut off", "annotations[0].result[1].value.choices"),
    ("annotations.0.result.1.value.choices", ["made-up flag"], "annotations[0].result[1].value.choices"),
    ("annotations.0.result.2.value.text", {"a": 1}, "annotations[0].result[2].value.text"),
    ("annotations.0.completed_by", [7], "annotations[0].completed_by"),
    ("annotations.0.completed_by", KeyError, "annotations[0].completed_by"),
    ("annotations.0.lead_time", "soon", "annotations[0].lead_time"),
    ("annotations.0.updated_at", 5, "annotations[0].updated_at"),
]


@pytest.mark.parametrize("path, value, field", HOSTILE_EXPORTS, ids=[f"{p}={v!r}" for p, v, _ in HOSTILE_EXPORTS])
def test_a_malformed_label_studio_export_is_one_line_and_saves_nothing(ls_review, tmp_path, capsys, path, value, field):
    db, task = ls_review
    good = json.loads(json.dumps(task))
    _set(task, path, value)
    export = tmp_path / "export.json"
    export.write_text(json.dumps([good, task]))  # the good task first: nothing of it may be saved either
    capsys.readouterr()
    assert main(["review", "import", str(export), "--db", str(db)]) == 2
    one_line(capsys, str(export), "item 1 (id 1)", f"field '{field}'")
    assert ReviewStore(db).labels() == []


def test_a_task_that_is_no_object_and_a_valid_export(ls_review, tmp_path, capsys):
    db, task = ls_review
    export = tmp_path / "export.json"
    export.write_text(json.dumps([42]))
    assert main(["review", "import", str(export), "--db", str(db)]) == 2
    one_line(capsys, str(export), "item 0", "expected a task")
    export.write_text(json.dumps([task]))
    assert main(["review", "import", str(export), "--db", str(db)]) == 0
    (label,) = ReviewStore(db).labels()
    assert (label.uid, label.annotator, label.flags, label.note) == (
        task["data"]["rmb_uid"],
        "label-studio:7",
        ("cut_off",),
        "hm",
    )
