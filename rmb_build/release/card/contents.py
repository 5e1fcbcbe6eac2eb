"""The card's sections on what the release holds: items per scenario, the answers' models, the judges,
the audit's defects and the query sources with their licence."""

from __future__ import annotations

from collections import Counter

from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.release.audit import DEFECT_KINDS, AuditReport, defects_phrase
from rmb_build.release.card.licence import CardLicense
from rmb_build.release.card.markdown import describe, table
from rmb_build.release.hf import judge_scores
from rmb_build.release.manifest_model import Manifest
from rmb_build.release.read import Release


def scenario_table(release: Release) -> str:
    counts: dict[str, Counter] = {}
    for it in release.items():
        counts.setdefault(it.scenario_id, Counter())[it.set_name] += 1
    rows = [[f"`{sc}`", c[PAIRWISE_SET], c[BON_SET]] for sc, c in sorted(counts.items())]
    rows.append(["**total**", sum(c[PAIRWISE_SET] for c in counts.values()), sum(c[BON_SET] for c in counts.values())])
    return table(["scenario", "pairwise", "bon"], rows)


def model_table(release: Release) -> str:
    counts: dict[str, Counter] = {}
    for it in release.items():
        for a in it.answers():
            counts.setdefault(a.llm_name, Counter())[it.set_name] += 1
    rows = [
        [f"`{m}`", c[PAIRWISE_SET], c[BON_SET]]
        for m, c in sorted(counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    ]
    return table(["model", "answers in pairwise", "answers in bon"], rows)


def judges(manifest: Manifest, annotations: list[dict]) -> str:
    lines = []
    for key in ("judges", "judge", "guard"):
        for where in (manifest.legacy_judges, manifest.models):
            if where.get(key):
                entries = where[key] if isinstance(where[key], list) else [where[key]]
                lines += [f"- {key.rstrip('s')}: {describe(e)}" for e in entries]
    named = Counter(str(a[k]) for a in annotations for k in ("judge", "judge_model") if a.get(k))
    lines += [f"- `{name}` (named by {n} annotation lines)" for name, n in named.most_common()]
    scored = {k for keys in judge_scores(annotations)[1].values() for k in keys}
    if scored:
        lines.append(f"- judge scores are included as columns: {', '.join(f'`{k}`' for k in sorted(scored))}")
    return "\n".join(lines) or "The release records no judges (it has no judge annotations or manifest entry)."


def audit_section(audit: AuditReport | dict | None) -> str:
    if audit is None:
        return "No audit was run."
    summary = audit.summary() if isinstance(audit, AuditReport) else audit
    counts = summary.get("counts", {})
    rows = [[f"`{k}`", counts.get(k, 0)] for k in (*DEFECT_KINDS, *sorted(set(counts) - set(DEFECT_KINDS)))]
    text = (
        "Defects found by `rmb audit` (definitions in `rmb_build.release.audit`); the items are "
        "published as they are.\n\n" + table(["defect", "count"], rows)
    )
    text += f"\n\nTotal: {defects_phrase(summary.get('total', sum(counts.values())), summary.get('items_flagged'))}."
    for note in summary.get("notes", []):
        text += f"\n\nNote: {note}"
    if summary.get("shortcuts"):
        text += "\n\n" + shortcuts_section(summary["shortcuts"])
    return text


def shortcuts_section(shortcuts: dict) -> str:
    """The card's lines of ``rmb audit --shortcuts``: the subsets a trivial scorer beats chance on."""
    flagged = [r for r in shortcuts["rows"] if r["flagged"]]
    head = (
        f"Shortcuts (`rmb audit --shortcuts`): {len(flagged)} of {shortcuts['tests']} (set, subset, trivial scorer) "
        f"cells beat chance at p < {shortcuts['alpha']} after {shortcuts['correction'].title()}'s correction"
    )
    if not flagged:
        return head + "."
    rows = [
        [r["set"], f"`{r['subset']}`", r["scorer"], f"{100 * r['accuracy']:.1f}", f"{100 * r['chance']:.1f}",
         r["decided"], f"{r['p_adjusted']:.2g}"]
        for r in flagged
    ]  # fmt: skip
    return head + ":\n\n" + table(["set", "subset", "scorer", "accuracy %", "chance %", "decided", "p (Holm)"], rows)


def licence_text(lic: CardLicense) -> str:
    """The licence line under the sources: the build's own words where the Hub id cannot carry them."""
    if not lic.other or not lic.statement:
        return ""
    link = f" Terms: <{lic.link}>." if lic.link else ""
    return (
        f"\n\n**Licence**, as the build states it: {lic.statement.rstrip('.')}.{link} The Hub lists no id for "
        f"it: this card's metadata says `license: other`, `license_name: {lic.name}`."
    )


def sources_table(sources: list[dict]) -> str:
    if not sources:
        return "The release's manifest lists no query sources."

    def first(s: dict, *keys: str) -> object:
        return next((s[k] for k in keys if s.get(k) not in (None, "")), "")

    rows = [
        [
            first(s, "name", "id", "kind") or "?",
            first(s, "url", "path"),
            first(s, "license") or "not stated",
            first(s, "kept", "count", "queries"),
        ]
        for s in sources
    ]
    return table(["source", "where", "licence", "queries kept"], rows)
