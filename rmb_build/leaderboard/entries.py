"""One leaderboard entry per ``rmb evaluate`` output folder: RMB's four cells, their mean and intervals."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmb_build.core.errors import InputError
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.evaluate.compare import ReleaseId, release_id
from rmb_build.evaluate.metrics import RMB_CELLS as CELLS

if TYPE_CHECKING:
    from rmb_build.evaluate.published import Evaluation

MEAN = "mean"
COLUMNS = (*CELLS, MEAN)


@dataclass
class Entry:
    """What the index and the RM's page show about one evaluation folder."""

    folder: Path
    results: dict[str, Any]
    values: dict[str, float | None]  # column -> accuracy (cells and mean)
    ci95: dict[str, list[float] | None]  # column -> [lo, hi]
    n: dict[str, int | None]  # cell -> items
    slug: str = ""  # unique per evaluation: what the page's rows, rank intervals and tests are keyed by
    label: str = ""  # the name shown: the RM spec, with its protocol when another evaluation shares the spec
    vs_next: dict[str, Any] | None = field(default=None)  # paired test against the next entry by mean
    downstream: dict[str, Any] | None = field(default=None)  # its row of an ``rmb downstream`` result
    opened: Evaluation | None = field(
        default=None, repr=False
    )  # its ``Evaluation``: where it came from; keeps a converted form

    @property
    def results_file(self) -> str:
        """Its results.json as messages name it (a pushed form: the source the user gave)."""
        return self.opened.results_file if self.opened is not None else str(self.folder / "results.json")

    @property
    def rm(self) -> str:
        return self.results["rm"]

    @property
    def kind(self) -> str:
        """The RM spec's prefix: hf, openai, python, dpo, baseline."""
        return self.rm.partition(":")[0]

    @property
    def few_item_scenarios(self) -> dict[str, int]:
        """Per column, how many scenarios of few items its interval pools (conservative there; {} in older files)."""
        return dict((self.results.get("rmb_overall") or {}).get("few_item_scenarios") or {})

    @property
    def missing(self) -> list[str]:
        """The cells the release has no items for (``rmb_overall`` is then the mean of the others)."""
        return [c for c in CELLS if self.values[c] is None]

    @property
    def release_name(self) -> str:
        return (self.results.get("release_info") or {}).get("name") or str(self.results.get("release", ""))

    @property
    def release(self) -> ReleaseId:
        """The release it scored: name and sha256 (None where results.json records none)."""
        return release_id(self.results)


def _cells_from_sets(results: dict[str, Any]) -> tuple[dict, dict, dict]:
    """The four cells from the sets' goal macros, for results.json files written before ``rmb_overall``."""
    values, ci, n = {}, {}, {}
    for cell in CELLS:
        set_name, goal = cell.split("/")
        g = results.get(set_name, {}).get("goals", {}).get(goal)
        values[cell] = g["macro"] if g else None
        ci[cell] = g.get("ci95_macro") if g else None
        n[cell] = g.get("n") if g else None
    present = [v for v in values.values() if v is not None]
    values[MEAN] = sum(present) / len(present) if present else None  # as evaluate: over the cells present
    ci[MEAN] = None  # needs the joint bootstrap that evaluate records in rmb_overall
    return values, ci, n


def cells(results: dict[str, Any]) -> tuple[dict, dict, dict]:
    """(values, ci95, n) per column, from ``rmb_overall`` when results.json has it."""
    overall = results.get("rmb_overall")
    if not overall:
        return _cells_from_sets(results)
    values = {c: overall.get("cells", {}).get(c) for c in CELLS}
    values[MEAN] = overall.get("mean")
    ci = {c: (overall.get("ci95") or {}).get(c) for c in COLUMNS}
    n = {c: (overall.get("n") or {}).get(c) for c in CELLS}
    fallback = _cells_from_sets(results)
    for c in CELLS:  # a cell evaluate left without an interval or count: take its goal's
        ci[c] = ci[c] or fallback[1][c]
        n[c] = n[c] if n[c] is not None else fallback[2][c]
    return values, ci, n


def load_entry(source: str | Path, *, require_predictions: bool = False) -> Entry:
    """The entry of an ``rmb evaluate`` folder or of its pushed form (a folder or a Hub id, see
    ``evaluate.published``); InputError names the file and field when it is neither.

    Its figures are checked against its item outcomes (predictions.jsonl): a results.json whose figures its
    predictions do not give, or whose predictions cover part of its release, is refused in one line. Without
    predictions.jsonl nothing can be checked: refused when ``require_predictions`` (a page shows only what it
    can recompute), else shown as written, without intervals where they are older than today's.
    """
    from rmb_build.evaluate.published import open_evaluation, read_results

    opened = open_evaluation(source)
    folder = opened.folder
    path = folder / "results.json"
    if not path.is_file():
        raise InputError(str(path), "missing: not an 'rmb evaluate' output folder")
    # A results.json written before evaluate redacted its spec: pages and their names get the redacted one.
    results = read_results(path, opened.results_file)
    rows = _predictions(folder, require_predictions)
    if rows is not None:
        check_figures_match(results, rows, opened.results_file)
        check_whole(results, rows, opened.results_file)
    results = _with_current_intervals(results, rows)
    values, ci, n = cells(results)
    return Entry(folder=folder, results=results, values=values, ci95=ci, n=n, opened=opened)


def _predictions(folder: Path, required: bool) -> list[dict[str, Any]] | None:
    """The folder's prediction rows (each checked), or None where it has none and they are not required."""
    from rmb_build.evaluate.compare import read_predictions

    if not (folder / "predictions.jsonl").is_file():
        if required:
            raise InputError(
                str(folder / "predictions.jsonl"),
                "missing: a leaderboard shows only figures it can check against the item outcomes "
                "(the folder 'rmb evaluate' wrote holds them)",
            )
        return None
    return read_predictions(folder)


TOLERANCE = 1e-9


def _point_figures(results: dict[str, Any]) -> dict[str, Any]:
    """field -> value of every figure a page shows that the predictions determine (accuracies, macros, counts),
    as far as ``results`` records them."""
    out: dict[str, Any] = {}

    def take(prefix: str, block: object, keys: tuple[str, ...]) -> None:
        for key in keys:
            if isinstance(block, dict) and key in block:
                out[f"{prefix}.{key}"] = block[key]

    for set_name in (PAIRWISE_SET, BON_SET):
        part = results.get(set_name) or {}
        for name, sc in (part.get("scenarios") or {}).items():
            take(f"{set_name}.scenarios.{name}", sc, ("accuracy", "n"))
        for kind in ("tasks", "goals"):
            for name, g in (part.get(kind) or {}).items():
                take(f"{set_name}.{kind}.{name}", g, ("macro", "micro", "n"))
        take(f"{set_name}.overall", part.get("overall"), ("macro", "micro", "n"))
    overall = results.get("rmb_overall") or {}
    take("rmb_overall", overall, ("mean",))
    for part in ("cells", "n"):
        block = overall.get(part) or {}
        take(f"rmb_overall.{part}", block, tuple(block))
    return out


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(float(a) - float(b)) <= TOLERANCE


def check_figures_match(results: dict[str, Any], rows: list[dict[str, Any]], where: str) -> None:
    """InputError naming the first figure of ``results`` that its prediction ``rows`` do not give (an edited
    headline, a scenario added or dropped), with both values."""
    from rmb_build.evaluate.metrics import build_results

    given = build_results(rows, rm=results["rm"], release="", ties=results.get("ties") or "strict", resamples=1)
    fresh, written = _point_figures(given), _point_figures(results)
    # every figure written (an older results.json lacks some), and every scenario the predictions hold
    names = [*written, *(f for f in fresh if ".scenarios." in f and f not in written)]
    for name in sorted(names, key=lambda f: (not f.startswith("rmb_overall"), f)):
        if name.startswith("rmb_overall.n.") and not fresh.get(name) and not written.get(name):
            continue  # a cell the release lacks: 0 or not recorded
        if not _same(written.get(name), fresh.get(name)):
            raise InputError(
                where,
                f"{written.get(name)!r}, but its predictions.jsonl gives {fresh.get(name)!r}: not the figures of "
                "its item outcomes (edited, or not one evaluation); re-run 'rmb evaluate'",
                field=name,
            )


def check_whole(results: dict[str, Any], rows: list[dict[str, Any]], where: str) -> None:
    """InputError where the evaluation covers only part of its release (``coverage.partial``, or fewer item
    outcomes than the release has items to score): a partial figure is never ranked beside whole ones."""
    from rmb_build.evaluate.coverage import PARTIAL_FLAG

    counts = (results.get("release_info") or {}).get("items") or {}
    skipped = (results.get("skipped_defective") or {}).get("n") or 0
    items = sum(counts.values()) - skipped if counts else (results.get("coverage") or {}).get("items")
    if bool((results.get("coverage") or {}).get("partial")) or (items is not None and len(rows) < items):
        raise InputError(
            where,
            f"partial: its predictions cover {len(rows):,} of the {items if items is None else format(items, ',')} "
            f"items of its release (evaluated with {PARTIAL_FLAG}); a leaderboard ranks whole evaluations only",
            field="coverage",
        )


def _with_current_intervals(results: dict[str, Any], rows: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``results`` whose figures carry today's intervals. A results.json written before them (no
    ``intervals``) has percentile-bootstrap intervals, of zero width on unanimous groups: they are
    recomputed from its predictions (``rows``), or dropped (shown as missing) when it has none. One written
    under an earlier interval rule (its ``intervals.method``) is recomputed where its predictions are at hand, so
    that one page shows one rule; without them it is shown as written."""
    from rmb_build.core.intervals import METHOD

    recorded = results.get("intervals")
    if recorded is not None and (recorded.get("method") == METHOD or rows is None):
        return results
    if rows is not None:
        from rmb_build.evaluate.metrics import build_results

        drawn = results.get("bootstrap") or {}
        fresh = build_results(
            rows,
            rm=results["rm"],
            release=str(results.get("release", "")),
            ties=results.get("ties", "strict"),
            resamples=drawn.get("resamples", (recorded or {}).get("draws", 4000)),
            seed=drawn.get("seed", (recorded or {}).get("seed", 0)),
        )
        out = {**results, **{k: fresh[k] for k in (PAIRWISE_SET, BON_SET, "rmb_overall", "intervals")}}
        if isinstance(results.get("style"), dict):  # its records are not read here: shown without the old intervals
            out["style"] = _without_style_intervals(results["style"])
        return out
    overall = results.get("rmb_overall") or {}
    return {
        **results,
        "rmb_overall": {**overall, "ci95": {}},
        **{
            s: {**results[s], "goals": {g: {**v, "ci95_macro": None} for g, v in results[s].get("goals", {}).items()}}
            for s in (PAIRWISE_SET, BON_SET)
        },
    }


def _without_style_intervals(style: dict[str, Any]) -> dict[str, Any]:
    """results.json's ``style`` (and its ``bon`` part) with every group's ``ci95`` and few-record count dropped."""
    out = dict(style)
    for part in ("scenarios", "tasks", "goals"):
        if isinstance(style.get(part), dict):
            out[part] = {k: _no_ci(v) for k, v in style[part].items()}
    if isinstance(style.get("overall"), dict):
        out["overall"] = _no_ci(style["overall"])
    if isinstance(style.get("bon"), dict):
        out["bon"] = _without_style_intervals(style["bon"])
    return out


def _no_ci(group: Any) -> Any:
    if not isinstance(group, dict):
        return group
    return {k: v for k, v in group.items() if k not in ("ci95", "few_item_scenarios")}


def assign_slugs(entries: list[Entry]) -> None:
    """File-name-safe, unique page names from the RM specs (``baseline-length``, ``baseline-length-2``), and the
    names shown: a spec that several evaluations share is followed by each one's protocol (or folder)."""
    used: set[str] = set()
    specs = [e.rm for e in entries]
    for e in entries:
        protocol = e.results.get("protocol")
        name = protocol.get("name") if isinstance(protocol, dict) else None
        e.label = e.rm if specs.count(e.rm) == 1 else f"{e.rm} (protocol {name or 'not recorded'})"
    labels = [e.label for e in entries]
    for e in entries:
        if labels.count(e.label) > 1:  # the same spec under the same protocol: the folders tell them apart
            e.label = f"{e.label}, {e.folder.name}"
    for e in entries:
        base = slug = re.sub(r"[^A-Za-z0-9]+", "-", e.rm).strip("-").lower()[:60] or "rm"
        k = 1
        while slug in used:
            k += 1
            slug = f"{base}-{k}"
        used.add(slug)
        e.slug = slug
