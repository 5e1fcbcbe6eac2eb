"""``rmb publish`` and ``rmb push-results`` share their push options and check them alike, before any work
(``commands/_hub_push.py``)."""

from __future__ import annotations

import pytest

from rmb_build.cli import main


@pytest.mark.parametrize("command", ["publish", "push-results"])
def test_push_options_are_checked_alike_before_any_work(tmp_path, capsys, command):
    missing = str(tmp_path / "no-such-input")  # never read: the options are refused first
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    refused = [
        (
            ["--repo-id", "not a repo", "--dry-run", "--out", str(tmp_path / "x")],
            "--repo-id 'not a repo': expected ORG/NAME",
        ),
        (["--repo-id", "me/demo", "--dry-run"], "--dry-run needs --out DIR (the folder to write what would be pushed)"),
        (["--repo-id", "me/demo", "--dry-run", "--out", str(used)], "choose an empty folder"),
    ]
    for args, line in refused:
        assert main([command, missing, *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and line in err and "no-such-input" not in err, err
    assert (used / "notes.txt").read_text() == "mine"
