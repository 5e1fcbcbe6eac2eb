"""What this machine has for parallel work: usable cores and available memory, and the one-line refusal
of a request for more processes than it can run side by side (``--devices``, an embedded endpoint's
``servers:``).

Past the cores, processes only take turns: 16 CPU replicas scored 3.4x slower than 2 on two cores, and 8
embedded servers took 2.5 GB and 130 s to start."""

from __future__ import annotations

import os
from pathlib import Path


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory() -> int | None:
    """Bytes of memory available to start new work (Linux's MemAvailable), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def process_cap(what: str, asked: int, each_bytes: int | None = None) -> str | None:
    """Why ``asked`` processes of ``what`` (each about ``each_bytes`` of memory) exceed this machine, or
    None when they fit: at most one per usable core, and all of them within the available memory."""
    cores = usable_cores()
    if asked > cores:
        return f"{asked} {what} on {cores} usable core{'s' * (cores != 1)}: give at most {cores}"
    memory = available_memory()
    if each_bytes and memory is not None and asked > 1 and asked * each_bytes > memory:
        fit = max(1, memory // each_bytes)
        return (
            f"{asked} {what} of about {each_bytes / 2**30:.1f} GiB each need {asked * each_bytes / 2**30:.1f} GiB; "
            f"{memory / 2**30:.1f} GiB is available: give at most {fit}"
        )
    return None


__all__ = ["available_memory", "process_cap", "usable_cores"]
