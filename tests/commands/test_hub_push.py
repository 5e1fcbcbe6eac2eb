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


@pytest.mark.parametrize("command", ["publish", "push-results"])
def test_a_push_that_cannot_start_is_refused_before_the_input_is_read(tmp_path, capsys, monkeypatch, command):
    """Without a token (or offline) nothing could be pushed: publish found it only after its audit."""
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    assert main([command, str(tmp_path / "no-such-input"), "--repo-id", "me/demo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot push: " in err and "no-such-input" not in err, err
    out = tmp_path / "out"
    assert main([command, str(tmp_path / "no-such-input"), "--repo-id", "me/demo", "--dry-run", "--out", str(out)]) == 2
    assert "no-such-input" in capsys.readouterr().err  # a dry run needs no token: the input is read


def test_a_dry_run_ends_with_one_line_and_pushes_nothing(capsys):
    import argparse

    from rmb_build.commands._hub_push import push_unless_dry_run

    pushed: list[str] = []

    def push() -> str:
        pushed.append("me/demo")
        return "https://huggingface.co/datasets/me/demo"

    assert push_unless_dry_run(argparse.Namespace(dry_run=True, repo_id="me/demo"), push) == 0
    assert capsys.readouterr().out == "dry run: nothing pushed to me/demo\n" and not pushed
    assert push_unless_dry_run(argparse.Namespace(dry_run=False, repo_id="me/demo"), push) == 0
    assert capsys.readouterr().out == "pushed to https://huggingface.co/datasets/me/demo\n" and pushed == ["me/demo"]
