"""One writer at a time: an exclusive ``fcntl.flock`` on a lock file, which the kernel releases when its
holder ends, SIGKILL included, so a lock is never left stale.

A second taker is refused at once in one line naming the holder (pid, host, since when): rmb's writers
run for minutes or hours, and a command that waited that long unasked would look hung. The lock file
records its holder for that line and is removed when the lock is let go.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import functools
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rmb_build.core import owner
from rmb_build.core.errors import RMBError, environment_error

Run = Callable[[argparse.Namespace], int]


def out_lock_file(out: str | os.PathLike) -> Path:
    """The lock file of an output folder: a hidden sibling ``.<name>.lock`` (the folder itself is replaced
    whole, so its lock cannot live inside it)."""
    target = Path(os.path.abspath(out))
    return target.with_name(f".{target.name}.lock")


def _holder(fd: int, patience_s: float = 2.0) -> str:
    """Who holds the lock, as its file says; a holder that has just taken it is given a moment to say so."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            raw = os.pread(fd, 4096, 0)
            found = owner.Owner.from_json(json.loads(raw.decode("utf-8")))
        except (OSError, ValueError):
            found = None
        if found is not None:
            return found.describe()
        if time.monotonic() > deadline:
            return "another process, which has not said which"
        time.sleep(0.02)


WAIT = "wait for it to end or stop it"


def _take(path: Path, what: str, hint: str, wait_s: float = 0.0, on_wait: Callable[[str], object] | None = None) -> int:
    """An open descriptor of ``path`` holding its lock. A holder may remove the file on letting go while
    we open it: the lock is ours only if ``path`` is still the file we locked. A lock held by another is
    waited for up to ``wait_s`` seconds before the refusal; ``on_wait(holder)`` is told once, as the wait begins."""
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            held = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            if held and time.monotonic() < deadline:
                try:
                    if on_wait is not None and not told:
                        told = True
                        on_wait(_holder(fd))
                finally:
                    os.close(fd)
                time.sleep(0.1)
                continue
            holder = _holder(fd) if held else ""
            os.close(fd)
            if held:
                raise RMBError(f"{what}: in use by {holder}; {hint}") from None
            raise RMBError(f"{what}: cannot lock {path}: {exc.strerror or exc}") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


_held: dict[str, int] = {}  # lock files this process holds -> how many blocks hold each


@contextmanager
def hold(
    path: str | os.PathLike,
    what: str,
    hint: str = WAIT,
    wait_s: float = 0.0,
    on_wait: Callable[[str], object] | None = None,
) -> Iterator[None]:
    """Hold the lock ``path`` for the block; RMBError "``what``: in use by pid … on …" if another has it
    (after ``wait_s`` seconds of waiting for it, where given; ``on_wait`` is told the holder as the wait
    begins). A block inside one holding the same lock (a command's, then ``atomic_dir``'s) just goes on."""
    path = Path(os.path.abspath(path))
    key = str(path)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _take(path, what, hint, wait_s, on_wait)
    except FileExistsError:  # mkdir's word for a file in the way
        raise RMBError(f"{what}: cannot write: {path.parent}: {os.strerror(errno.ENOTDIR)}") from None
    except OSError as exc:
        line = environment_error(exc)
        if line is None:
            raise
        raise RMBError(f"{what}: cannot write: {line}") from exc
    _held[key] = 1
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner.current().to_json()) + "\n").encode("utf-8"), 0)
        yield
    finally:
        try:
            os.unlink(path)  # while still held: a taker that opened it meanwhile sees it is gone and retries
        except OSError:
            pass
        os.close(fd)
        del _held[key]


@contextmanager
def hold_out(
    out: str | os.PathLike,
    flag: str = "--out",
    hint: str = WAIT,
    wait_s: float = 0.0,
    on_wait: Callable[[str], object] | None = None,
) -> Iterator[None]:
    """One writer of an output folder (or file) at a time (``out_lock_file``)."""
    with hold(out_lock_file(out), f"{flag} {out}", hint, wait_s, on_wait):
        yield


def locks_out(attr: str = "out", flag: str = "--out", hint: str = WAIT) -> Callable[[Run], Run]:
    """For a command's ``run``: hold the lock of the folder ``args.<attr>`` names (where given) for the
    whole command, from its first check of the folder to its last write."""

    def wrap(run: Run) -> Run:
        @functools.wraps(run)
        def locked(args: argparse.Namespace) -> int:
            out = getattr(args, attr, None)
            if not out:
                return run(args)
            with hold_out(out, flag, hint):
                return run(args)

        return locked

    return wrap
