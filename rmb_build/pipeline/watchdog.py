"""A watchdog that stops every process a build started once the build's process is gone, even after
SIGKILL: ``python -m rmb_build.pipeline.watchdog PID``, started by :func:`watch_children`.

Prefect's temporary API server is spawned by Prefect itself, so no parent-death signal can be set on
it. The watchdog, in a session of its own (a kill of the build's process group spares it), notes the
build's descendants every ``POLL_S`` seconds while the build runs; when the build is gone it sends
them SIGTERM, then SIGKILL to those still alive 5 s later, and exits. (The embedded server, which may
start less than ``POLL_S`` before a kill, also watches its parent itself.) Linux only (it reads /proc).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 1.0  # a scan of /proc costs a few ms: cheap beside a build, which runs for minutes
GRACE_S = 5.0
_started: list[subprocess.Popen] = []


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, None when it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of ``root``: pid -> start time (to tell a reused pid from the original)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                children.setdefault(st[0], []).append(int(entry.name))
                starts[int(entry.name)] = st[1]
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out[child] = starts[child]
                todo.append(child)
    return out


def _alive(pid: int, start: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] == start


def _stop(procs: dict[int, int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = {p: s for p, s in procs.items() if _alive(p, s)}
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + GRACE_S
        while live and time.monotonic() < deadline:
            time.sleep(0.1)
            live = {p: s for p, s in live.items() if _alive(p, s)}
        if not live:
            return
        procs = live


def watch(parent: int, parent_start: int) -> None:
    """Note ``parent``'s descendants until it is gone, then stop them."""
    seen: dict[int, int] = {}
    me = os.getpid()
    while _alive(parent, parent_start):
        seen.update(descendants(parent))
        seen.pop(me, None)
        seen = {p: s for p, s in seen.items() if _alive(p, s)}
        time.sleep(POLL_S)
    _stop(seen)


def watch_children() -> subprocess.Popen | None:
    """Start the watchdog for this process (None where /proc is missing)."""
    me = os.getpid()
    st = _stat(me)
    if st is None:
        return None
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmb_build.pipeline.watchdog", str(me), str(st[1])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _started.append(proc)  # it outlives this process by design: keep the handle from being collected
    return proc


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the build handles Ctrl-C; the watchdog cleans up after it
    watch(int(sys.argv[1]), int(sys.argv[2]))
