"""rmb_build.memory: freed large blocks go back to the system (glibc), so a build's resident memory
follows what it holds, not the largest batch it ever had in flight."""

from __future__ import annotations

import sys

import pytest

from rmb_build.memory import bound_allocator, give_back

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux)")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


def test_freed_blocks_leave_the_process():
    if not bound_allocator():
        pytest.skip("the allocator is not glibc's")
    # A large block freed first raises glibc's dynamic mmap threshold (what the encoder's tensors do):
    # without bound_allocator the 1 MiB blocks below would then come from the heap, and the small
    # blocks kept between them would pin all 300 MiB there after they are freed (measured: 346 MB stay).
    first = bytearray(8 << 20)
    first[::4096] = b"\1" * len(first[::4096])
    del first
    give_back()
    before = _rss_mb()
    blocks, pins = [], []
    for i in range(300):
        block = bytearray((1 << 20) + 4096 * (i % 64))
        block[::4096] = b"\1" * len(block[::4096])  # touched: resident
        blocks.append(block)
        pins.append(bytearray(2000))  # outside Python's small-object arenas: from the heap, kept
    held = _rss_mb()
    del blocks, block
    after = _rss_mb()
    assert held - before > 250, (before, held)
    assert after - before < 30, f"RSS {before:.0f} MB before, {held:.0f} MB holding, {after:.0f} MB after freeing"
    assert len(pins) == 300
