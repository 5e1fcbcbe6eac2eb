"""The docs cannot drift from the code: the README stays short and every command in it is a valid
``rmb`` command line (the quick ones run as written on a small release); the command reference page is
the CLI's own help; the MkDocs site builds with ``--strict``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from leaderboard_helpers import small_release

from rmb_build.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# commands that run in seconds on a small release: run as written; the others are only parsed
QUICK = re.compile(r"^rmb (models|compare|leaderboard|audit data/|publish .*--dry-run|evaluate .*--rm baseline:)")


def page_commands(page: Path) -> list[str]:
    """The ``rmb`` command lines in a page's shell code blocks (continued lines joined, comments dropped);
    a synopsis with [optional] parts goes in a ``text`` block."""
    blocks = re.findall(r"```(?:bash|sh|console|)\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    lines = [
        re.sub(r"\s+#.*$", "", line).strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()
    ]
    return [line for line in lines if line.startswith("rmb ")]


def readme_commands() -> list[str]:
    return page_commands(README)


def _parses(line: str) -> bool:
    try:
        build_parser().parse_args(shlex.split(line)[1:])
    except SystemExit:
        return False
    return True


def test_the_readme_is_short():
    assert len(README.read_bytes()) <= 12 * 1024


def test_every_readme_command_is_a_valid_command_line():
    commands = readme_commands()
    assert len(commands) >= 10
    assert not [line for line in commands if not _parses(line)], "README commands that do not parse"


def test_every_command_in_the_docs_pages_is_a_valid_command_line():
    pages = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "commands.md"]  # generated
    found = {p.name: page_commands(p) for p in pages}
    assert sum(map(len, found.values())) >= 15
    bad = [f"{name}: {line}" for name, lines in found.items() for line in lines if not _parses(line)]
    assert not bad, bad


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_the_quick_readme_commands_run_as_written(tmp_path, monkeypatch, capsys):
    release = small_release(tmp_path / "data" / "release" / "demo")
    manifest = json.loads((release / "manifest.json").read_text())  # a built release names its licence
    (release / "manifest.json").write_text(json.dumps({**manifest, "license": "cc-by-4.0"}))
    monkeypatch.chdir(tmp_path)
    quick = [line for line in readme_commands() if QUICK.match(line)]
    assert {line.split()[1] for line in quick} >= {"models", "evaluate", "compare", "leaderboard", "audit", "publish"}
    for line in quick:
        code = main(shlex.split(line)[1:])
        assert code == 0, f"README: {line!r} exited {code}: {capsys.readouterr().err[-2000:]}"
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "hf" / "README.md").is_file()


def test_the_command_reference_is_the_clis_own_help():
    from rmb_build.cli_reference import markdown

    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert page == markdown(), "docs/commands.md is stale: python -m rmb_build.cli_reference > docs/commands.md"


def test_contributings_audit_recipe_is_the_audits_own_code():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    recipe = text[text.index("### An audit defect kind") :]
    example = re.search(r"```python\n(.*?)```", recipe, flags=re.S).group(1)
    kinds = ROOT / "rmb_build" / "release" / "audit" / "kinds"
    same = [p.name for p in kinds.glob("*.py") if p.read_text(encoding="utf-8") == example]
    assert same, "CONTRIBUTING's audit example is no kind's module in release/audit/kinds/: copy the file again"


def test_the_docs_site_builds_strictly(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed: pip install -e '.[test]' installs it (mkdocs-material)")
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "commands" / "index.html").is_file()


def test_the_limits_page_says_results_travel():
    """Issue 48 item 10: docs/limits.md said results could not be pushed long after `rmb push-results` shipped."""
    limits = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
    assert "push-results" in build_parser().format_help()
    assert "there is no `--push-results-to-hub`" not in limits and "`rmb push-results`" in limits
