"""The dataset card's text, byte for byte, for manifests of several ages: a stub build's (``built.json``, as
the writer wrote it), one with every optional section (``enriched.json``), one an earlier version wrote
(``old.json``: ``labelled_by_people``, top-level ``judges``, no ``cast`` or ``sets``) and an empty one.
The expected cards in ``tests/release/card_golden/`` were rendered by the card before it was split into modules
and read typed manifests; a change to the card's words updates them on purpose."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmb_build.release.audit import DEFECT_KINDS, audit_release
from rmb_build.release.card import render_card
from rmb_build.release.load import read_release

GOLDEN = Path(__file__).parent / "card_golden"


def _evidence(m: dict) -> None:
    m["harm_evidence"]["classifier_is_evidence"] = True


CASES = {
    # name: (manifest file, change to it, render_card's options; "audit": "run" audits the release)
    "built": ("built.json", None, {"audit": "run"}),
    "enriched": ("enriched.json", None, {"review": "review.json", "audit": "manifest"}),
    "enriched-evidence": ("enriched.json", _evidence, {"title": "Evidence"}),
    "old": ("old.json", None, {}),
    "bare": ("bare.json", None, {"license": "Apache-2.0"}),
}


def _stable(card: str) -> str:
    """The card without the audit table's rows of kinds found 0 times: a defect kind declared later
    adds such a row, which is no change of the card's words."""
    zeros = {f"| `{kind}` | 0 |" for kind in DEFECT_KINDS}
    return "\n".join(line for line in card.split("\n") if line not in zeros)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_card_reads_as_before(case, tmp_path):
    name, change, options = CASES[case]
    root = tmp_path / "release"
    shutil.copytree(GOLDEN / "release", root)
    manifest = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    if change:
        change(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    release = read_release(root)
    kwargs = dict(options)
    if kwargs.get("review"):
        kwargs["review"] = json.loads((GOLDEN / kwargs["review"]).read_text(encoding="utf-8"))
    if kwargs.get("audit") == "run":
        kwargs["audit"] = audit_release(release, near_duplicates=False)
    elif kwargs.get("audit") == "manifest":
        kwargs["audit"] = manifest["audit"]
    card = render_card(release, repo_id="me/labels", **kwargs)
    assert _stable(card) == _stable((GOLDEN / f"{case}.md").read_text(encoding="utf-8"))


def test_the_card_says_routing_stopped_on_an_unreadable_guard(tmp_path):
    root = tmp_path / "release"
    shutil.copytree(GOLDEN / "release", root)
    manifest = json.loads((GOLDEN / "built.json").read_text(encoding="utf-8"))
    line = "routing stopped: 3 of 4 guard replies were unreadable, so no query's goal comes from the guard"
    manifest["routing"]["queries"]["stopped"] = line
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    card = render_card(read_release(root), repo_id="me/labels")
    assert f"The guard's replies were mostly unreadable: {line}." in card
