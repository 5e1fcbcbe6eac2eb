"""Keep a long build's resident memory near what it holds: glibc's allocator settings and hand-back.

Measured on ``rmb build`` here: the sentence encoder's tensors and each LLM stage's requests are
freed, but glibc keeps the freed pages (its mmap threshold grows after every large free, so later
large blocks land in the heap and fragment it): resident memory grew ~100 MB per 1,000 texts
encoded, though the live Python objects grew by a few MB. A fixed mmap threshold returns every large
block to the system when freed, and ``give_back`` trims what small frees left behind.

The sentence encoder is the exception: each batch allocates and frees tensors of several MiB, and
with the fixed 1 MiB threshold every one of them is a fresh mapping whose pages fault in again
(measured here: 800 ShareGPT prompts in 23 s instead of 16 s). ``encoder_allocation`` lifts the
thresholds while an encoder runs, hands free pages back when asked and the heap grew past a
headroom (``embeddings.embed`` asks between groups of batches) and trims once it is done, which
leaves the same resident memory. ``HeapTrimmer`` is that hand-back for any long loop (the release's
item loops use it).
Elsewhere than glibc all of these are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Callable, Iterator

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20  # blocks from 1 MiB up are mapped on their own and unmapped when freed
# While encoding: blocks under 8 MiB come from the heap and the heap's top keeps up to 8 MiB between
# batches. Measured in a 1,000-query build (5,688 texts): as fast as 32 MiB / 256 MiB (89 s vs 87 s of
# encoding; 1 MiB: about 1.4x that), with a peak 70 MB lower.
ENCODER_MMAP_THRESHOLD = 8 << 20
ENCODER_TRIM_THRESHOLD = 8 << 20
# An encoder's hand_back trims only once resident memory grew this much since its last trim (each
# trim costs pages faulted in again). bench/encoder_memory.py on a build's gathered texts, 2,000 /
# 8,000 of them: peaks of 743 / 795 MB, against 784 / 855 MB trimming after every 128 texts (1.08x
# the seconds at 8,000) and 829 / 942 MB trimming only at the end (1.18x).
ENCODER_HEADROOM_MB = 48

_state = threading.Lock()
_bounded = False  # bound_allocator ran in this process
_encoders = 0  # encoders running now (threads of one process share its allocator)


@lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # noqa: B018  (glibc only)
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def bound_allocator() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (see the module docstring); False where
    the allocator is not glibc's."""
    global _bounded
    libc = _libc()
    if libc is None:
        return False
    with _state:
        _bounded = bool(_set_thresholds(libc, MMAP_THRESHOLD, MMAP_THRESHOLD))
        return _bounded


def _set_thresholds(libc, mmap: int, trim: int) -> bool:
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap) and libc.mallopt(_M_TRIM_THRESHOLD, trim))


def resident_mb() -> float | None:
    """This process's resident memory in MB (from /proc); None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _page_size() / 2**20
    except (OSError, ValueError, IndexError):
        return None


@lru_cache(maxsize=1)
def _page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


@contextmanager
def encoder_allocation(headroom_mb: float | None = None) -> Iterator[Callable[[], None]]:
    """Run an encoder with roomy allocator thresholds, back to ``bound_allocator``'s and trimmed when
    the last encoder running in this process finishes; nothing happens unless ``bound_allocator`` ran.
    Yields ``hand_back`` (to call between groups of batches): it returns the heap's free pages to the
    system once resident memory grew more than ``headroom_mb`` (default ``ENCODER_HEADROOM_MB``)
    since the scope began or its last trim, so the encoder's peak stays near where it started however
    many texts it encodes, and it pays for no trim it does not need."""
    global _encoders
    libc = _libc()
    headroom = ENCODER_HEADROOM_MB if headroom_mb is None else headroom_mb
    with _state:
        active = _bounded and libc is not None
        if active:
            if _encoders == 0:
                _set_thresholds(libc, ENCODER_MMAP_THRESHOLD, ENCODER_TRIM_THRESHOLD)
            _encoders += 1
    hand_back = HeapTrimmer(headroom) if active else (lambda: None)
    try:
        yield hand_back
    finally:
        if active:
            with _state:
                _encoders -= 1
                if _encoders == 0:
                    _set_thresholds(libc, MMAP_THRESHOLD, MMAP_THRESHOLD)
                    libc.malloc_trim(0)


class HeapTrimmer:
    """A hand-back for a long loop (call it once an item): every ``every`` calls it looks at resident
    memory and returns the heap's free pages to the system once it grew more than ``headroom_mb``
    since the trimmer was made or last trimmed. A no-op where the allocator is not glibc's.

    Why a loop needs it: once a big heap was trimmed, the loop's short-lived blocks land in its free
    chunks all over it, and every page they touch counts as resident again until the next trim."""

    def __init__(self, headroom_mb: float = ENCODER_HEADROOM_MB, every: int = 1):
        self.headroom, self.every, self.calls = headroom_mb, max(1, every), 0
        self._libc = _libc()
        self.mark = resident_mb() if self._libc is not None else None

    def __call__(self) -> None:
        self.calls += 1
        if self._libc is None or self.mark is None or self.calls % self.every:
            return
        now = resident_mb()
        if now is None or now - self.mark <= self.headroom:
            return
        self._libc.malloc_trim(0)
        self.mark = resident_mb()


def give_back() -> None:
    """Collect garbage and return the allocator's free pages to the system (between stages and chains).

    What survives the collection is frozen (``gc.freeze``): later collections skip it, so each costs
    what was made since, not the ~500,000 long-lived objects of torch and transformers (a full
    collection over those took 0.33 s here, and a build hands back after every stage and chain:
    7.5 of a small build's 8.3 s). Frozen objects are still freed by reference counting as soon as
    nothing holds them; only a cycle that became garbage after being frozen waits for ``thaw``, which
    the build calls when it ends."""
    gc.collect()
    gc.freeze()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def thaw() -> None:
    """Undo ``give_back``'s freezing, so that the next collection looks at everything again."""
    gc.unfreeze()
