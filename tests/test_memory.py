"""rmb_build.memory: freed large blocks go back to the system (glibc), so a build's resident memory
follows what it holds, not the largest batch it ever had in flight."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux)")

# Run in a fresh interpreter: what earlier tests loaded into this one (torch's threads and arenas)
# decides where later blocks land, and the allocator's behaviour is a property of the whole process.
PROBE = r"""
import json, sys
from rmb_build.memory import bound_allocator, give_back

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:"))

bounded = bound_allocator() if sys.argv[1] == "bounded" else False
# A large block freed first raises glibc's dynamic mmap threshold (what the encoder's tensors do):
# without bound_allocator the 1 MiB blocks below then come from the heap, and the small blocks kept
# between them pin all 300 MiB there after they are freed.
first = bytearray(8 << 20)
first[::4096] = b"\1" * len(first[::4096])
del first
give_back()
before = rss_mb()
blocks, pins = [], []
for i in range(300):
    block = bytearray((1 << 20) + 4096 * (i % 64))
    block[::4096] = b"\1" * len(block[::4096])  # touched: resident
    blocks.append(block)
    pins.append(bytearray(2000))  # outside Python's small-object arenas: from the heap, kept
held = rss_mb()
del blocks, block
print(json.dumps({"bounded": bounded, "before": before, "held": held, "after": rss_mb(), "pins": len(pins)}))
"""


def _probe(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_freed_blocks_leave_the_process():
    plain = _probe("plain")
    if plain["after"] - plain["before"] < 150:
        # Where this process's allocator hands the blocks back by itself, the probe cannot tell the
        # fix from its absence: say so instead of passing a test that could not fail here.
        pytest.skip(f"without bound_allocator the freed blocks left the process anyway ({plain})")
    bounded = _probe("bounded")
    if not bounded["bounded"]:
        pytest.skip("the allocator is not glibc's")
    assert bounded["held"] - bounded["before"] > 250, bounded
    assert bounded["after"] - bounded["before"] < 30, bounded
