"""Who wrote a folder or holds a lock (``core/owner.py``), and when that writer is provably gone."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from rmb_build.core import owner


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_this_process_is_here_and_not_gone():
    me = owner.current()
    assert me.pid == os.getpid() and owner.here(me) and not owner.gone(me)
    assert owner.Owner.from_json(me.to_json()) == me


def test_a_writer_is_gone_only_when_it_provably_runs_no_more():
    me = owner.current()
    assert owner.gone(dataclasses.replace(me, pid=_dead_pid()))  # exited here
    if me.start:  # a reused pid: another process now runs under it
        assert owner.gone(dataclasses.replace(me, start=str(int(me.start) + 1)))
    # pid means nothing across hosts, boots or PID namespaces: never gone
    for change in ({"host": "elsewhere.example"}, {"boot_id": "another-boot"}, {"pid_namespace": "pid:[1]"}):
        assert not owner.gone(dataclasses.replace(me, pid=_dead_pid(), **change))


def test_a_record_that_is_no_owner_is_refused():
    good = owner.current().to_json()
    for bad in (None, [], {**good, "pid": 10**30}, {**good, "pid": True}, {**good, "pid": 0}, {**good, "host": 3}):
        assert owner.Owner.from_json(bad) is None
