"""Which process wrote something, and whether that process is provably gone.

A hidden folder ``atomic_dir`` writes and a lock file name their writer by an ``Owner``: pid, host, and what
tells this host's processes apart from another's that share the file system (the kernel's boot id and PID
namespace, where the system has them) and a reused pid from the writer (the process's start time). Only an
owner of this host, this boot and this PID namespace whose pid is not running, or runs a process started at
another time, is gone; anything else (another host, a container with its own PIDs, a system that says
nothing) may still be writing.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

_MAX_PID = 2**31 - 1  # os.kill refuses (OverflowError) a pid that does not fit a C int


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def start_ticks(pid: int) -> str:
    """The process's start time (clock ticks after boot, from ``/proc/<pid>/stat``); "" where unknown."""
    stat = _read(f"/proc/{pid}/stat")
    # the command name (field 2) may hold spaces and parentheses: count fields after its last ")"
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    boot_id: str
    pid_namespace: str
    start: str  # start_ticks(pid)
    since: str  # when it took the folder or lock, ISO 8601 UTC, for people to read

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}" + (f", since {self.since}" if self.since else "")

    @classmethod
    def from_json(cls, raw: object) -> Owner | None:
        """The owner a marker or lock file records; None where it is not one this module wrote."""
        if not isinstance(raw, dict):
            return None
        pid = raw.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= _MAX_PID:
            return None
        fields = ("host", "boot_id", "pid_namespace", "start", "since")
        if not all(isinstance(raw.get(f), str) for f in fields):
            return None
        return cls(pid, *(raw[f] for f in fields))


def current() -> Owner:
    pid = os.getpid()
    since = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Owner(
        pid, socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), _pid_namespace(), start_ticks(pid), since
    )


def here(owner: Owner) -> bool:
    """Whether ``owner``'s pid names a process of this host, boot and PID namespace."""
    me = current()
    return (owner.host, owner.boot_id, owner.pid_namespace) == (me.host, me.boot_id, me.pid_namespace)


def gone(owner: Owner) -> bool:
    """True only where ``owner`` provably runs no more (see the module's docstring)."""
    if not here(owner):
        return False
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        pass
    started = start_ticks(owner.pid)
    return bool(owner.start and started and started != owner.start)
