"""``core/machine.py``: a request for more processes than the machine runs side by side is one line."""

from __future__ import annotations

import rmb_build.core.machine as machine


def test_processes_are_capped_by_cores_and_memory(monkeypatch):
    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    monkeypatch.setattr(machine, "available_memory", lambda: 3 << 30)
    assert machine.process_cap("servers", 2, 1 << 30) is None
    assert machine.process_cap("servers", 16) == "16 servers on 2 usable cores: give at most 2"
    monkeypatch.setattr(machine, "usable_cores", lambda: 8)
    assert machine.process_cap("servers", 4, 1 << 30) == (
        "4 servers of about 1.0 GiB each need 4.0 GiB; 3.0 GiB is available: give at most 3"
    )
    assert machine.process_cap("servers", 1, 8 << 30) is None  # one is the baseline, not this check's to refuse
    monkeypatch.setattr(machine, "available_memory", lambda: None)
    assert machine.process_cap("servers", 4, 1 << 30) is None


def test_the_machine_is_read():
    assert machine.usable_cores() >= 1
    memory = machine.available_memory()
    assert memory is None or memory > 0
