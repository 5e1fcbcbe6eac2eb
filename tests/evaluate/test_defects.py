"""The release's audit as evaluate reports it (``evaluate/defects.py``): audited once per release content and
item order, then read back from the cache's ``audits/`` (the audit was most of a cached evaluate's time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.evaluate import defects
from rmb_build.release import read_release, write_release
from rmb_build.release.provenance import release_sha256
from rmb_build.release.read import Release

SCENARIO = "Helpfulness/Chat/Discussion"


def _release(root: Path, second: str = "Pear.") -> Release:
    rel = Release(name="tiny", root=None)
    rel.add(
        PairwiseItem("0", (Turn("user", "Name a fruit"),), Answer("m1", "Apple."), Answer("m2", "Apple."), SCENARIO)
    )
    rel.add(PairwiseItem("1", (Turn("user", "Name a colour"),), Answer("m1", "Red."), Answer("m2", second), SCENARIO))
    write_release(rel, root)
    return read_release(root)


def _audit(release: Release, cache: Path) -> defects.ReleaseDefects:
    return defects.audit_defects(release, cache, release_sha256(release))


def test_a_release_is_audited_once_then_read_back(tmp_path, monkeypatch):
    release = _release(tmp_path / "rel")
    first = _audit(release, tmp_path / "cache")
    assert first.counts["identical_pair"] == 1 and list(first.kinds.values()) == [{"identical_pair"}]

    def no_audit(_release):
        raise AssertionError("audited again")

    monkeypatch.setattr(defects, "_audit", no_audit)
    again = _audit(read_release(tmp_path / "rel"), tmp_path / "cache")
    assert again.counts == first.counts and again.kinds == first.kinds


@pytest.mark.parametrize("change", ["content", "order"])
def test_another_content_or_order_is_audited_anew(tmp_path, change):
    release = _release(tmp_path / "rel")
    _audit(release, tmp_path / "cache")
    if change == "content":
        other = _release(tmp_path / "other", second="Red.")  # now item 1 is an identical pair too
        assert _audit(other, tmp_path / "cache").counts["identical_pair"] == 2
    else:  # the same items, the other order: the defect's index moves with its item
        items = release.files[("pairwise", SCENARIO)]
        items.reverse()
        assert release_sha256(release) == release_sha256(_release(tmp_path / "again"))  # the order is not in it
        assert set(_audit(release, tmp_path / "cache").kinds) == {(f"Pairwise_set/{SCENARIO}.json", 1)}


def test_a_broken_cached_audit_is_audited_again_and_a_read_only_cache_costs_nothing(tmp_path):
    release = _release(tmp_path / "rel")
    first = _audit(release, tmp_path / "cache")
    (kept,) = (tmp_path / "cache" / defects.AUDITS).iterdir()
    kept.write_text(json.dumps({"counts": {"identical_pair": 1}})[:-3])  # cut short
    assert _audit(release, tmp_path / "cache").kinds == first.kinds
    assert json.loads(kept.read_text())["kinds"]  # whole again
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    assert _audit(release, blocked).kinds == first.kinds


def test_a_kinds_code_and_a_stored_category_path_are_in_the_key(tmp_path, monkeypatch):
    """The defect kinds are found by name at run time (no import scan reaches them), and the content hash reads
    items with a missing category_path filled in, which category_mismatch flags: both were outside the key."""
    import dataclasses

    from rmb_build.core.items import default_category_path

    release = _release(tmp_path / "rel")
    items = release.files[("pairwise", SCENARIO)]
    items[0] = dataclasses.replace(items[0], category_path="")  # missing: category_mismatch flags it
    content = release_sha256(release)
    missing = defects.audit_key(release, content)
    items[0] = dataclasses.replace(items[0], category_path=default_category_path("pairwise", SCENARIO))
    assert release_sha256(release) == content  # the content hash cannot tell the two apart...
    filled = defects.audit_key(release, content)
    assert filled != missing  # ...the key can
    kind = Path(defects.__file__).parents[1] / "release" / "audit" / "kinds" / "contradiction.py"
    real = Path.read_bytes

    def edited(path):
        data = real(path)
        return data + b"\n# an edit\n" if path == kind else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert defects.audit_key(release, content) != filled  # a kind's edit makes the audit run again
