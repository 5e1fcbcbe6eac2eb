"""Group entries by the release they scored, order each group by ``rmb_overall`` and test every pair of entries
(``rmb compare``'s paired test of ``rmb_overall``, on their shared items): "vs. next", "separated" and the rank
intervals (``rank_intervals``) all read these tests.

Entries of different releases are never ranked against each other: ``release_groups`` refuses a mix in
one line naming the releases, or, when asked, returns one group per release. An entry whose results.json
records no release sha256 cannot be shown to share items with any other: it is refused beside others, or
put in a group of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmb_build.core.errors import InputError, RMBError
from rmb_build.evaluate.compare import ReleaseId, compare_pairs, paired_by_uid
from rmb_build.leaderboard.entries import MEAN, Entry, assign_slugs

ALPHA = 0.05
GROUP_FLAG = "--group-by-release"


@dataclass
class Group:
    """The entries that scored one release, best ``rmb_overall`` first once ranked."""

    release: ReleaseId
    entries: list[Entry]
    table_id: str = "board"
    tests: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # ``pair_tests`` once ranked


def _release_list(groups: list[Group]) -> str:
    return ", ".join(
        f"{g.release.label()}: {len(g.entries)} folder{'' if len(g.entries) == 1 else 's'}" for g in groups
    )


def release_groups(entries: list[Entry], allow_mixed: bool = False) -> list[Group]:
    """One group per release sha256 (in first-seen order); an entry without one alone in its group.

    Unless ``allow_mixed``, more than one group is refused: RMBError naming the releases, or InputError
    naming the results.json that records no sha256.
    """
    groups: dict[Any, Group] = {}
    for e in entries:
        rid = e.release
        key = rid.sha256 or ("unrecorded", id(e))
        groups.setdefault(key, Group(rid, [])).entries.append(e)
    out = list(groups.values())
    if len(out) > 1 and not allow_mixed:
        unknown = next((g for g in out if g.release.sha256 is None), None)
        if unknown is not None:
            raise InputError(
                unknown.entries[0].results_file,
                "records no release sha256 (written before 'rmb evaluate' recorded it), so it cannot be "
                f"ranked against the others; re-run 'rmb evaluate', or add {GROUP_FLAG} to show it "
                "in a table of its own",
                field="release_info",
            )
        raise RMBError(
            f"the results come from {len(out)} releases ({_release_list(out)}); reward models are ranked "
            f"only against others scored on the same release: pass one release's folders, or add "
            f"{GROUP_FLAG} for one table per release"
        )
    for k, g in enumerate(out):
        g.table_id = "board" if k == 0 else f"board-{k + 1}"
    return out


def by_mean(entries: list[Entry]) -> list[Entry]:
    """Best ``rmb_overall`` first; entries without one last, in the order given."""
    return sorted(entries, key=lambda e: (e.values[MEAN] is None, -(e.values[MEAN] or 0.0)))


def _predictions(entry: Entry) -> list[dict[str, Any]] | None:
    """The entry's item outcomes (its predictions.jsonl), None where it has none."""
    from rmb_build.evaluate.compare import read_predictions

    return read_predictions(entry.folder) if (entry.folder / "predictions.jsonl").is_file() else None


def pair_tests(ordered: list[Entry], resamples: int, seed: int = 0) -> dict[tuple[str, str], dict[str, Any]]:
    """``rmb compare``'s test of ``rmb_overall`` for every pair of ``ordered`` (best first), keyed by the two
    entries' slugs, the better-ranked first: ``{"rm", "slug", "diff", "ci95", "p", "significant"}`` (A - B, the
    same numbers ``rmb compare A B`` prints with this seed and number of draws), or ``significant`` None with a
    ``reason`` where no test could run. The one test behind "vs. next", "separated" and the rank intervals.
    """
    rows = [_predictions(e) for e in ordered]
    tests: dict[tuple[str, str], dict[str, Any]] = {}
    for i, a in enumerate(ordered):
        for j in range(i + 1, len(ordered)):
            tests[(a.slug, ordered[j].slug)] = pair_test_of_rows(a, ordered[j], rows[i], rows[j], resamples, seed)
    return tests


def pair_test_of_rows(
    a: Entry, b: Entry, rows_a: list[dict] | None, rows_b: list[dict] | None, resamples: int, seed: int
) -> dict[str, Any]:
    """A's ``rmb_overall`` against B's from their prediction rows (None: the entry has none), as ``rmb compare``
    computes it (``compare.compare_pairs``): diff, ci95, p, significant."""
    out: dict[str, Any] = {"rm": b.rm, "slug": b.slug, "significant": None}
    if rows_a is None or rows_b is None:
        missing = [str(e.folder / "predictions.jsonl") for e, r in ((a, rows_a), (b, rows_b)) if r is None]
        return {**out, "reason": f"no item outcomes ({', '.join(missing)} missing)"}
    pairs = paired_by_uid(rows_a, rows_b)
    if not pairs:
        return {**out, "reason": "the two share no items"}
    test = compare_pairs(pairs, resamples, seed).get("rmb_overall")
    if not test:
        return {**out, "reason": "the two share no items in RMB's four cells"}
    return {**out, "diff": test["diff"], "ci95": test["ci95"], "p": test["p"], "significant": test["p"] < ALPHA}


def rank(entries: list[Entry], resamples: int, seed: int = 0) -> tuple[list[Entry], dict[tuple[str, str], Any]]:
    """Entries of one release by ``rmb_overall``, each (but the last) with ``vs_next`` set, and every pair's
    test (``pair_tests``): "vs. next" is the test of the pair it names."""
    if len({e.slug for e in entries}) < len(entries):  # the tests are keyed by slug
        assign_slugs(entries)
    ordered = by_mean(entries)
    tests = pair_tests(ordered, resamples, seed)
    for a, b in zip(ordered, ordered[1:]):
        a.vs_next = tests[(a.slug, b.slug)]
    return ordered, tests


def rank_groups(groups: list[Group], resamples: int, seed: int = 0) -> list[Group]:
    """Each group ranked on its own (groups stay in the order their first folder was given), with its tests."""
    for g in groups:
        g.entries, g.tests = rank(g.entries, resamples, seed)
    return groups
