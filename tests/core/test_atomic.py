"""Whole-or-absent folders (``core/atomic.atomic_dir``): what a writer killed mid-way leaves behind."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmb_build.core import atomic, lock, owner
from rmb_build.core.atomic import atomic_dir


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _write(out: Path, text: str) -> None:
    with atomic_dir(out, owned=("a.txt",), marks=("a.txt",)) as tmp:
        (tmp / "a.txt").write_text(text)


# A writer of ``out`` in a child process that dies (os._exit: no clean-up, as under SIGKILL) at a chosen
# moment: "write", inside the block, or "swap", once the earlier output is set aside.
_KILLED = """
import os, sys
from pathlib import Path
from rmb_build.core import atomic
out, moment = Path(sys.argv[1]), sys.argv[2]
rename = os.rename
def dying_rename(src, dst):
    if moment == "swap" and Path(dst) == out.absolute():
        os._exit(9)
    rename(src, dst)
atomic.os.rename = dying_rename
with atomic.atomic_dir(out, owned=("a.txt",), marks=("a.txt",)) as tmp:
    (tmp / "a.txt").write_text("half")
    (tmp / "big.bin").write_bytes(b"x" * 1024)
    if moment == "write":
        os._exit(9)
"""


def _killed_writer(out: Path, moment: str) -> list[Path]:
    """Run a writer of ``out`` killed at ``moment``; the hidden folders it left."""
    before = set(out.parent.iterdir())
    done = subprocess.run([sys.executable, "-c", _KILLED, str(out), moment], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    return sorted(set(out.parent.iterdir()) - before - {out, lock.out_lock_file(out)})  # its lock is free


def _forge(folder: Path, **changes: object) -> None:
    """A marker in ``folder`` as this process would write it, with ``changes``."""
    folder.mkdir()
    token = folder.name.rsplit("-", 1)[1]
    marker = {"token": token, **owner.current().to_json(), **changes}
    (folder / atomic.MARKER).write_text(json.dumps(marker))


def test_a_killed_writers_hidden_folder_is_swept_and_a_live_ones_kept(tmp_path, capsys):
    """A writer SIGKILLed before its rename leaves ``.<name>.tmp-<pid>-…`` (a whole release's worth of
    bytes); the next write of the same output removes it, and never a live writer's."""
    out = tmp_path / "out"
    _write(out, "one")
    (stale,) = _killed_writer(out, "write")
    assert stale.name.startswith(".out.tmp-") and (stale / "big.bin").exists()
    live = tmp_path / f".out.tmp-{os.getppid()}-def"  # this test's parent: alive
    _forge(live, pid=os.getppid(), start=owner.start_ticks(os.getppid()))
    other = tmp_path / f".other.tmp-{_dead_pid()}-ghi"  # another output's: not this write's business
    other.mkdir()
    _write(out, "two")
    assert (out / "a.txt").read_text() == "two"
    assert not stale.exists() and live.is_dir() and other.is_dir()
    assert capsys.readouterr().err == ""  # a live writer's folder is no news
    assert [p.name for p in out.iterdir()] == ["a.txt"]  # the writer's marker does not reach the output


def test_an_output_set_aside_by_a_killed_writer_is_put_back_before_the_next_write(tmp_path):
    """Killed between setting the earlier output aside and renaming the new one in, a writer leaves no
    output and a hidden ``-old`` folder: the next write starts from the output as it was."""
    out = tmp_path / "out"
    _write(out, "one")
    new, aside = _killed_writer(out, "swap")  # the new output, and the earlier one set aside
    assert aside.name == new.name + "-old" and not out.exists()

    class Refused(Exception):
        pass

    try:
        with atomic_dir(out, owned=("a.txt",), marks=("a.txt",)) as tmp:
            (tmp / "a.txt").write_text("half")
            raise Refused  # this write fails too: the output must still be the earlier one
    except Refused:
        pass
    assert (out / "a.txt").read_text() == "one" and not aside.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-")]


def test_a_users_folders_named_like_a_writers_are_left_and_named(tmp_path, capsys):
    """Issue 48: a folder of the user's named like a writer's, ``.ev.tmp-32767-notes`` (pid 32767 not
    running), kept its files only by luck before; one named ``…-old`` was moved into place as the output.
    Neither was written by rmb (no marker): both are left as they are, each named in one line."""
    out = tmp_path / "ev"
    notes = tmp_path / ".ev.tmp-32767-notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("my notes")
    old = tmp_path / f".ev.tmp-{_dead_pid()}-draft-old"
    old.mkdir()
    (old / "a.txt").write_text("not an output")
    _write(out, "new")
    assert (notes / "mine.txt").read_text() == "my notes" and (old / "a.txt").read_text() == "not an output"
    assert (out / "a.txt").read_text() == "new"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("holds no marker" in line for line in err), err
    assert {line.split(": ")[1] for line in err} == {f"left {notes}", f"left {old}"}


def test_a_pid_too_large_for_a_c_long_is_no_error(tmp_path, capsys):
    """Issue 48: a sibling whose "pid" does not fit a C long made every write fail with OverflowError."""
    huge = tmp_path / f".ev.tmp-{10**30}-x"
    huge.mkdir()
    _write(tmp_path / "ev", "ok")
    assert (tmp_path / "ev" / "a.txt").read_text() == "ok" and huge.is_dir()
    forged = tmp_path / f".ev.tmp-{10**30}-{'ab' * 8}"
    _forge(forged, pid=10**30)  # a marker naming that pid is no marker of ours either
    _write(tmp_path / "ev", "again")
    assert (tmp_path / "ev" / "a.txt").read_text() == "again" and huge.is_dir() and forged.is_dir()
    assert len(capsys.readouterr().err.splitlines()) == 3


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"host": "elsewhere.example"}, "may still be writing"),  # another NFS client
        ({"pid_namespace": "pid:[1]"}, "may still be writing"),  # a container sharing the volume
        ({"token": "0" * 16}, "does not match its name"),  # a marker copied from elsewhere
    ],
)
def test_a_folder_another_host_may_be_writing_is_left_and_named(tmp_path, capsys, changes, why):
    """Issue 48: a live writer in another PID namespace had its folder swept (and ended with results.json
    but no predictions.jsonl). Its pid means nothing here: the folder is left, and named."""
    dead = _dead_pid()
    theirs = tmp_path / f".ev.tmp-{dead}-{'cd' * 8}"
    _forge(theirs, pid=dead, **changes)
    _write(tmp_path / "ev", "ok")
    assert theirs.is_dir()
    (line,) = capsys.readouterr().err.splitlines()
    assert str(theirs) in line and why in line


def test_the_output_is_looked_at_only_while_its_lock_is_held(tmp_path, monkeypatch):
    """The racing writers below failed now and then on a loaded machine: ``atomic_dir`` checked ``out`` before
    taking its lock, so another writer's swap in between (``out`` renamed away, its old files being removed)
    read as a raw FileNotFoundError or as a foreign folder instead of "in use by". Every check of ``out``
    now happens while this writer holds the output's lock."""
    out = tmp_path / "out"
    _write(out, "one")
    check, locked_at_check = atomic.check_out_dir, []

    def check_and_say_whether_locked(folder, *args, **kwargs):
        fd = os.open(lock.out_lock_file(folder), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file's lock blocks this one
            fcntl.flock(fd, fcntl.LOCK_UN)
            locked_at_check.append(False)
        except BlockingIOError:
            locked_at_check.append(True)
        finally:
            os.close(fd)
        return check(folder, *args, **kwargs)

    monkeypatch.setattr(atomic, "check_out_dir", check_and_say_whether_locked)
    _write(out, "two")
    assert (out / "a.txt").read_text() == "two"
    assert locked_at_check and all(locked_at_check), locked_at_check


# A writer that replaces ``out`` again and again; any error but a one-line refusal ends it non-zero.
_REPEATED = """
import sys
from pathlib import Path
from rmb_build.core.atomic import atomic_dir
from rmb_build.core.errors import RMBError
out, me = Path(sys.argv[1]), sys.argv[2]
wrote = refused = 0
for n in range(60):
    try:
        with atomic_dir(out, owned=("a.txt", "b.txt"), marks=("a.txt",)) as tmp:
            (tmp / "a.txt").write_text(f"{me} {n}")
            (tmp / "b.txt").write_text(f"{me} {n}")
        wrote += 1
    except RMBError as exc:
        assert "\\n" not in str(exc) and "in use by" in str(exc), exc
        refused += 1
print(wrote, refused)
"""


def test_writers_racing_for_one_output_each_write_whole_or_are_refused(tmp_path):
    """Issue 48: about 1% of concurrent swaps ended in a raw OSError (one writer's rename onto another's
    fresh output). Four writers replacing one folder at once: each write is whole or refused in one line,
    and the output is always one writer's whole folder."""
    out = tmp_path / "out"
    kids = [
        subprocess.Popen(
            [sys.executable, "-c", _REPEATED, str(out), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    done = [k.communicate(timeout=300) for k in kids]
    assert all(k.returncode == 0 for k in kids), [err[-2000:] for _, err in done]
    assert sum(int(o.split()[0]) for o, _ in done) > 0
    assert (out / "a.txt").read_text() == (out / "b.txt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no hidden folder, no lock file left
