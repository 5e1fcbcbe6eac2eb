"""The typed manifest (``release/manifest_model.py``): a manifest written by the build comes back as the same
JSON, and a section the dataset card reads that lacks a key it needs is refused in one line naming the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmb_build.cli import main
from rmb_build.core.errors import InputError
from rmb_build.release.manifest_model import Manifest

GOLDEN = Path(__file__).parent / "card_golden"


def _built() -> dict:
    """A stub build's manifest as the writer wrote it before it filled typed records."""
    return json.loads((GOLDEN / "built.json").read_text(encoding="utf-8"))


def test_a_built_manifest_comes_back_as_the_same_json():
    built = _built()
    again = Manifest.from_json(built).to_json()
    assert json.dumps(again, indent=1, ensure_ascii=False) == json.dumps(built, indent=1, ensure_ascii=False)


def test_the_writer_fills_the_records_the_card_reads(tmp_path):
    """``build_manifest``'s sets and cast are the typed records, written as the manifest's JSON."""
    from tests.release.test_selection_report import test_pairs_per_query_and_gap_histograms_reach_manifest_and_card

    test_pairs_per_query_and_gap_histograms_reach_manifest_and_card(tmp_path)
    written = json.loads((tmp_path / "sel" / "manifest.json").read_text(encoding="utf-8"))
    typed = Manifest.from_json(written)
    assert typed.to_json() == written
    assert typed.sets.pairwise.items == 13 and typed.cast.min_generators == 1
    assert list(written) == [k for k in _built() if k in written]  # the old writer's order


def _no_min_generators(m: dict) -> None:
    del m["cast"]["min_generators"]


def _classifier_without_recall(m: dict) -> None:  # its figures are read once the sources' labels are not the evidence
    del m["harm_evidence"]["labelled_by_sources"], m["harm_evidence"]["recall"]


def _short_goal_without_wanted(m: dict) -> None:
    m["accounting"]["queries"]["short_of_min_per_goal"] = {"Harmlessness": {"selected": 1, "with_evidence": 1}}


def _sets_not_a_mapping(m: dict) -> None:
    m["sets"] = ["pairwise"]


def assert_publish_refuses(manifest: dict, field: str, tmp_path, capsys) -> None:
    """``rmb publish --dry-run`` of the golden release with ``manifest``: exit 2, one line naming ``field``,
    nothing written."""
    root = tmp_path / "release"
    shutil.copytree(GOLDEN / "release", root)
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    out = tmp_path / "hf"
    rc = main(["publish", str(root), "--repo-id", "me/x", "--dry-run", "--out", str(out), "--no-embeddings"])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err_lines) == 1 and f"field '{field}'" in err_lines[0] and not out.exists()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (_no_min_generators, "cast.min_generators"),
        (_classifier_without_recall, "harm_evidence.recall"),
        (_short_goal_without_wanted, "accounting.queries.short_of_min_per_goal.Harmlessness.wanted"),
        (_sets_not_a_mapping, "sets"),
    ],
)
def test_a_section_without_a_key_the_card_needs_is_refused_naming_it(change, key, tmp_path, capsys):
    manifest = _built()
    change(manifest)
    with pytest.raises(InputError) as err:
        Manifest.from_json(manifest)
    assert str(err.value).startswith(f"manifest.json: field '{key}': ") and "\n" not in str(err.value)
    assert_publish_refuses(manifest, key, tmp_path, capsys)


@pytest.mark.parametrize(
    "key, value",
    [
        *((k, None) for k in ("precision", "precision_ci95", "recall", "threshold")),
        # a reviewer's values: the card crashed on each (TypeError, ValueError unpacking) after nulls were refused
        ("precision_ci95", [None, 0.9]),
        ("precision_ci95", [0.8]),
        ("precision_ci95", "high"),
        ("precision_ci95", [0.9, 0.2]),
        ("precision", "high"),
        ("recall", 1.5),
        ("threshold", True),
    ],
)
def test_a_null_figure_the_card_states_is_refused_in_one_line_naming_it(key, value, tmp_path, capsys):
    # before: the card crashed with a TypeError (100 * None, unpacking None) and publish printed a traceback
    manifest = _built()
    del manifest["harm_evidence"]["labelled_by_sources"]  # the classifier's figures are the evidence
    manifest["harm_evidence"][key] = value
    assert_publish_refuses(manifest, f"harm_evidence.{key}", tmp_path, capsys)


def test_an_earlier_versions_manifest_loads():
    old = json.loads((GOLDEN / "old.json").read_text(encoding="utf-8"))
    m = Manifest.from_json(old)
    assert m.harm_evidence.labelled_by_label_set == {"mine": 3} and m.harm_evidence.labelled_by_sources == 2
    assert m.cast is None and m.sets is None and set(m.legacy_judges) == {"judges"}
    assert Manifest.from_json(None) == Manifest() == Manifest.from_json({})
