"""Render the static site: ``index.html``, and per RM ``rm/<slug>.html`` with its heatmap and results.json.

RMs are ranked only against RMs scored on the same release (the sha256 each results.json records): folders of
several releases are refused, or with ``group_by_release`` shown as one table per release, ranked and tested
within it (see ``ranking``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Sequence

from rmb_build import __version__
from rmb_build.core.atomic import write_json, write_text
from rmb_build.core.errors import RMBError
from rmb_build.core.redact import redact_json
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.evaluate.compare import DEFAULT_RESAMPLES, SHORT_SHA
from rmb_build.evaluate.heatmap import SET_TITLES
from rmb_build.leaderboard import style_columns
from rmb_build.leaderboard.entries import COLUMNS, MEAN, Entry, assign_slugs, load_entry
from rmb_build.leaderboard.rank_intervals import rank_uncertainty
from rmb_build.leaderboard.ranking import rank_groups, release_groups
from rmb_build.release.rmb_format import load_json_file

COLUMN_TITLES = {
    f"{PAIRWISE_SET}/Helpfulness": "Pairwise Helpfulness",
    f"{PAIRWISE_SET}/Harmlessness": "Pairwise Harmlessness",
    f"{BON_SET}/Helpfulness": "BoN Helpfulness",
    f"{BON_SET}/Harmlessness": "BoN Harmlessness",
    MEAN: "rmb_overall",
}
SETS = tuple(SET_TITLES.items())


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(ci: Sequence[float] | None) -> str:
    return "" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _few(n: int | None):
    """The mark beside a figure over fewer than FEW_ITEMS items (nothing otherwise)."""
    from markupsafe import Markup

    from rmb_build.core.intervals import FEW_MARK, few_count_note, few_items

    if n is None or not few_items(n):
        return ""
    return Markup(f'<span class="few" title="{n} items, {few_count_note()}">{FEW_MARK}</span>')


def _pooled_mark(few_item_scenarios: int | None):
    """The mark beside an interval that pools scenarios of few items (nothing otherwise)."""
    from markupsafe import Markup

    from rmb_build.core.intervals import FEW_MARK, POOLED_FEW_NOTE

    if not few_item_scenarios:
        return ""
    return Markup(
        f'<span class="few" title="{POOLED_FEW_NOTE} ({int(few_item_scenarios)} scenario(s))">{FEW_MARK}</span>'
    )


def _p_value(p: float, resamples: int) -> str:
    # A bootstrap p of 0 only says "below one resample's worth".
    return f"< {1 / resamples:.4f}" if p == 0 else f"= {p:.4f}"


def _defects_phrase(total: int, items: int | None) -> str:
    from rmb_build.release.audit import defects_phrase

    return defects_phrase(total, items)


def _short_sha(sha: str | None) -> str:
    return sha[:SHORT_SHA] if sha else "not recorded"


def _or_missing(x: object) -> object:
    from markupsafe import Markup

    return Markup('<span class="missing">not recorded</span>') if x in (None, "") else x


def environment():
    """The Jinja environment over the package's templates (HTML autoescaped)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rmb_build.leaderboard", "templates"),
        autoescape=jinja2.select_autoescape(("html",)),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pct=_pct,
        ci=_ci,
        or_missing=_or_missing,
        defects_phrase=_defects_phrase,
        few=_few,
        pooled_mark=_pooled_mark,
        p_value=_p_value,
        short_sha=_short_sha,
    )
    env.globals.update(version=__version__, columns=COLUMNS, column_titles=COLUMN_TITLES, sets=SETS)
    from rmb_build.core.intervals import FEW_MARK, METHOD, POOLED_FEW_NOTE, few_count_note

    # interval_method: a result of today's rules, whose intervals read no draws (rm.html shows no draws for it)
    env.globals.update(
        few_mark=FEW_MARK, pooled_few_note=POOLED_FEW_NOTE, few_count_note=few_count_note(), interval_method=METHOD
    )
    return env


def audits(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where from, {counts, total, items_flagged, notes}) for each audit summary the results record:
    evaluate's own (``release_defects``) and the one in the release's manifest (``release_info.audit``)."""
    out = []
    own = results.get("release_defects")
    if own:
        label = "run by rmb evaluate" + (
            "" if own.get("near_duplicates_checked") else ", near-duplicate prompts not checked"
        )
        out.append(
            (
                label,
                {
                    "counts": own["counts"],
                    "total": sum(own["counts"].values()),
                    "items_flagged": own.get("items"),
                    "notes": [],
                },
            )
        )
    built = (results.get("release_info") or {}).get("audit")
    if built:
        counts = built.get("counts", {})
        out.append(
            (
                "recorded in the release's manifest",
                {
                    "counts": counts,
                    "total": built.get("total", sum(counts.values())),
                    "items_flagged": built.get("items_flagged"),
                    "notes": built.get("notes", []),
                },
            )
        )
    return out


def write_heatmap_png(entry: Entry, path: Path) -> bool:
    """Draw the RM's per-scenario heatmap from its results; False when it has no scenarios."""
    from rmb_build.evaluate.heatmap import write_heatmap

    return write_heatmap(entry.results, path) is not None


def _copy_results(src: Path, dest: Path) -> None:
    """The RM's results.json as evaluate wrote it; redacted where it holds a secret (written before evaluate
    redacted its spec)."""
    data = load_json_file(src)
    clean = redact_json(data)
    if clean == data:
        shutil.copyfile(src, dest)
    else:
        write_json(dest, clean)


def build_site(
    folders: Sequence[str | Path],
    out: str | Path,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    title: str = "Reward model leaderboard",
    group_by_release: bool = False,
    downstream: str | Path | None = None,
) -> Path:
    """Write the site for the evaluation ``folders`` into ``out``; returns the index's path.

    Folders of different releases: RMBError, unless ``group_by_release`` (one table per release).
    ``downstream``: an ``rmb downstream --out`` folder; each RM it scored (same spec and fingerprint) gets its
    downstream score as a column, and its correlations with the benchmark are shown above the table.
    """
    if not folders:
        raise RMBError("no results folders given")
    entries = [load_entry(f, require_predictions=True) for f in folders]
    assign_slugs(entries)
    groups = rank_groups(release_groups(entries, allow_mixed=group_by_release), resamples=resamples, seed=seed)
    entries = [e for g in groups for e in g.entries]
    # Per table: rank intervals and separability, and the style / length-neutral columns its RMs have.
    uncertainty = {g.table_id: rank_uncertainty(g.entries, g.tests, resamples, seed) for g in groups}
    extra = {g.table_id: style_columns.table(g.entries) for g in groups}
    check = attach_downstream(entries, downstream) if downstream is not None else None
    out = Path(out)
    env = environment()
    page = env.get_template("rm.html")
    for e in entries:
        assets = out / "rm" / e.slug
        assets.mkdir(parents=True, exist_ok=True)
        _copy_results(e.folder / "results.json", assets / "results.json")
        drew = write_heatmap_png(e, assets / "heatmap.png")
        bias = e.results.get("bias") or {}
        release = e.results.get("release_info") or {}
        write_text(
            out / "rm" / f"{e.slug}.html",
            page.render(
                title=title,
                e=e,
                r=e.results,
                heatmap=f"{e.slug}/heatmap.png" if drew else None,
                length_bias=bias.get("length"),
                position_bias=bias.get("position"),
                release=release,
                audits=audits(e.results),
                resamples=resamples,
            ),
        )
    index = out / "index.html"
    write_text(
        index,
        env.get_template("index.html").render(
            title=title,
            entries=entries,
            groups=groups,
            kinds=sorted({e.kind for e in entries}),
            resamples=resamples,
            seed=seed,
            downstream=check,
            uncertainty=uncertainty,
            extra=extra,
        ),
    )
    return index


def attach_downstream(entries: Sequence[Entry], folder: str | Path) -> dict[str, Any]:
    """Give each entry its row of the downstream result in ``folder`` (matched by RM spec and fingerprint);
    returns what the index shows above the table: the correlations' headlines and the counts."""
    from rmb_build.analysis.downstream.outputs import headline, read_downstream

    result = redact_json(read_downstream(folder))  # specs as the entries hold them, whenever it was written
    rows = {(r.get("spec", key), r.get("fingerprint")): r for key, r in result.get("rms", {}).items()}
    for e in entries:
        e.downstream = rows.get((e.rm, e.results.get("fingerprint")))
    return {
        "folder": str(folder),
        "name": result.get("name", ""),
        "n_prompts": result.get("n_prompts"),
        "n_samples": result.get("n_samples"),
        "headlines": [headline(c) for c in result.get("correlations", [])],
        "matched": sum(e.downstream is not None for e in entries),
    }


def suite_page(suite: dict[str, Any]) -> str:
    """``rmb evaluate --suite``'s page: its row across the benchmarks and how each was measured (suite.json)."""
    return environment().get_template("suite.html").render(suite=suite)
