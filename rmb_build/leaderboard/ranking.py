"""Group entries by the release they scored, order each group by ``rmb_overall`` and test each entry against
the next one (``rmb compare``'s paired test, on their shared items).

Entries of different releases are never ranked against each other: ``release_groups`` refuses a mix in
one line naming the releases, or, when asked, returns one group per release. An entry whose results.json
records no release sha256 cannot be shown to share items with any other: it is refused beside others, or
put in a group of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmb_build.core.errors import InputError, RMBError
from rmb_build.evaluate.compare import ReleaseId, compare
from rmb_build.leaderboard.entries import MEAN, Entry

ALPHA = 0.05
GROUP_FLAG = "--group-by-release"


@dataclass
class Group:
    """The entries that scored one release, best ``rmb_overall`` first once ranked."""

    release: ReleaseId
    entries: list[Entry]
    table_id: str = "board"


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


def paired_test(a: Entry, b: Entry, resamples: int, seed: int) -> dict[str, Any]:
    """A's ``rmb_overall`` against B's, from ``rmb_build.evaluate.compare``: diff, ci95, p, significant.

    ``significant`` is None (with a ``reason``) where no test could run.
    """
    out: dict[str, Any] = {"rm": b.rm, "slug": b.slug, "significant": None}
    missing = [str(e.folder / "predictions.jsonl") for e in (a, b) if not (e.folder / "predictions.jsonl").is_file()]
    if missing:
        return {**out, "reason": f"no item outcomes ({', '.join(missing)} missing)"}
    result = compare(a.folder, b.folder, resamples=resamples, seed=seed)
    test = result.get("rmb_overall")
    if not test:
        shared = any(s in result for s in ("pairwise", "bon"))
        return {
            **out,
            "reason": "the two share no items"
            if not shared
            else "this version of 'rmb compare' has no rmb_overall test",
        }
    p = test.get("p", test.get("p_value"))
    return {
        **out,
        "diff": test["diff"],
        "ci95": test.get("ci95"),
        "p": p,
        "significant": None if p is None else p < ALPHA,
    }


def rank(entries: list[Entry], resamples: int, seed: int = 0) -> list[Entry]:
    """Entries of one release by ``rmb_overall``, each (but the last) with ``vs_next`` set."""
    ordered = by_mean(entries)
    for a, b in zip(ordered, ordered[1:]):
        a.vs_next = paired_test(a, b, resamples, seed)
    return ordered


def rank_groups(groups: list[Group], resamples: int, seed: int = 0) -> list[Group]:
    """Each group ranked on its own (groups stay in the order their first folder was given)."""
    for g in groups:
        g.entries = rank(g.entries, resamples, seed)
    return groups
