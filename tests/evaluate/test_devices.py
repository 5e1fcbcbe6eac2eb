"""``--devices``: a SIGKILLed ``rmb evaluate`` leaves no replica behind (each ties itself to its parent,
``core/lifeline.py``); before, both kept scoring at full CPU for minutes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import protocol_helpers as H
import pytest
from lazy_modules import importorskip_on_use

from rmb_build.core.items import Answer, PairwiseItem
from rmb_build.pipeline.watchdog import descendants
from rmb_build.release.read import Release
from rmb_build.release.write import write_release

importorskip_on_use("torch")
importorskip_on_use("transformers")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml


def _alive(pid: int, start: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0] != "Z" and int(fields[19]) == start


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow  # two replicas load torch and a model
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkilled_evaluate_leaves_no_replica(tmp_path):
    model = H.build_model(tmp_path / "model")
    release = Release(name="many", root=None)
    for i, (conv, chosen, rejected) in enumerate(H.conversations() * 400):  # minutes of scoring per replica
        release.add(PairwiseItem(str(i), conv, Answer("a", chosen + str(i)), Answer("b", rejected), "Harmlessness/S6"))
    write_release(release, tmp_path / "release")
    cmd = [sys.executable, "-m", "rmb_build.cli", "evaluate", "--release", str(tmp_path / "release")]
    cmd += ["--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--rm", f"hf:{model}"]
    cmd += ["--devices", "cpu,cpu", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "err.log", "wb"))
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 300
        while True:
            seen.update(descendants(proc.pid))
            replicas = [p for p in seen if "multiprocessing" in _cmdline(p) and "--multiprocessing-fork" in _cmdline(p)]
            if len(replicas) == 2:
                break
            assert proc.poll() is None, (tmp_path / "err.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the replicas did not start"
            time.sleep(0.2)
        time.sleep(2)  # into their work (loading torch and the model)
        seen.update(descendants(proc.pid))
        assert all(_alive(p, s) for p, s in seen.items() if p in replicas)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while any(_alive(p, s) for p, s in seen.items()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert {p: _cmdline(p) for p, s in seen.items() if _alive(p, s)} == {}
    finally:
        for pid, start in [*seen.items()]:
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_devices_are_capped_by_what_the_machine_has(monkeypatch):
    import rmb_build.core.machine as machine
    from rmb_build.evaluate.devices import machine_cap

    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    assert machine_cap(["cpu", "cpu"]) is None
    assert machine_cap(["cpu"] * 16) == "16 CPU replicas on 2 usable cores: give at most 2"
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert machine_cap([f"cuda:{count}"]) == f"cuda:{count}: this machine has {count} GPU{'s' * (count != 1)}"
    if count:
        assert "one replica per GPU" in machine_cap(["cuda:0", "cuda:0"])
