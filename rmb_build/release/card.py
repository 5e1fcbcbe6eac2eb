"""The dataset card (``README.md``) of a release's Hugging Face form: the Hub's YAML header and the text.

The text comes from ``prompts/dataset_card.md``, a Jinja2 template filled by ``rmb_build.core.text.fill``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any, Iterable, Mapping

import yaml

from rmb_build.core.errors import RMBError
from rmb_build.core.intervals import FEW_MARK, few_items
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.core.text import fill
from rmb_build.release.audit import DEFECT_KINDS, AuditReport, defects_phrase
from rmb_build.release.hf import CONFIGS, SPLIT, data_files_pattern, judge_scores
from rmb_build.release.read import Release
from rmb_build.release.style_set import STYLE_SET

CARD_TEMPLATE = "dataset_card.md"
TASK_CATEGORIES = ["text-classification"]
TAGS = ["reward-modeling", "preference", "rlhf", "benchmark", "rmb"]

# Language names as RMB's per-turn ``language`` tags spell them -> ISO 639-1 codes for the Hub.
LANGUAGE_CODES = {
    "arabic": "ar",
    "bengali": "bn",
    "bulgarian": "bg",
    "catalan": "ca",
    "chinese": "zh",
    "czech": "cs",
    "danish": "da",
    "dutch": "nl",
    "english": "en",
    "estonian": "et",
    "finnish": "fi",
    "french": "fr",
    "german": "de",
    "greek": "el",
    "hebrew": "he",
    "hindi": "hi",
    "hungarian": "hu",
    "indonesian": "id",
    "italian": "it",
    "japanese": "ja",
    "korean": "ko",
    "latin": "la",
    "malay": "ms",
    "maori": "mi",
    "norwegian": "no",
    "persian": "fa",
    "polish": "pl",
    "portuguese": "pt",
    "romanian": "ro",
    "russian": "ru",
    "serbian": "sr",
    "slovak": "sk",
    "spanish": "es",
    "swahili": "sw",
    "swedish": "sv",
    "tagalog": "tl",
    "tamil": "ta",
    "thai": "th",
    "turkish": "tr",
    "ukrainian": "uk",
    "urdu": "ur",
    "vietnamese": "vi",
}


# The licence ids the Hub accepts in a card's ``license:`` (the list its metadata validator names;
# https://huggingface.co/docs/hub/repositories-licenses). A licence not listed is ``other``, named by
# ``license_name`` and pointed to by ``license_link``.
HUB_LICENSES = frozenset(
    """
    apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
    bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda
    cc cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
    cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0
    cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0
    epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc
    h-research intel-research lppl-1.3c ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openmdw-1.0
    openmdw-1.1 openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr
    deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3
    llama4 grok2-community gemma unknown other
""".split()
)
LICENSES_URL = "https://huggingface.co/docs/hub/repositories-licenses"
LICENSE_NAME = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")  # the Hub's "an id ..., like my-license-1.0"
LICENSE_LINK = re.compile(r"https?://\S+|(?!/)(?!.*\.\.)[\w.-]+(?:/[\w.-]+)*")  # a URL, or a file in the repo
NAME_CHARS = 64


@dataclass(frozen=True)
class CardLicense:
    """The card's licence: ``id``, a Hub licence id (or a list of them); with ``other``, ``name`` and
    ``link`` (``license_name``, ``license_link``); ``statement``, the licence in the build's own words."""

    id: str | list[str]
    name: str | None = None
    link: str | None = None
    statement: str = ""

    @property
    def other(self) -> bool:
        return "other" in (self.id if isinstance(self.id, list) else [self.id])

    def header(self) -> dict[str, Any]:
        """The card header's licence keys."""
        extra = {"license_name": self.name, "license_link": self.link} if self.other else {}
        return {"license": self.id, **{k: v for k, v in extra.items() if v}}


def hub_license_id(text: str) -> str | None:
    """``text`` as a Hub licence id (any case), or None when the Hub does not list it."""
    key = text.strip().lower()
    return key if key in HUB_LICENSES else None


def license_slug(text: str) -> str | None:
    """A ``license_name`` from a licence's words: its words and numbers, hyphenated, at most 64 characters."""
    slug = ""
    for word in re.findall(r"[a-z0-9]+(?:\.[a-z0-9]+)*", text.lower()):
        if len(slug) + len(word) + 1 > NAME_CHARS:
            break
        slug = f"{slug}-{word}" if slug else word
    return slug or None


def _sources_of(manifest: Mapping) -> list[dict]:
    return [s for s in manifest.get("sources") or [] if isinstance(s, dict)]


def _stated(manifest: Mapping) -> list[str]:
    """The release's licence as its manifest states it: ``license``, else each source's."""
    if isinstance(manifest.get("license"), str) and manifest["license"].strip():
        return [manifest["license"].strip()]
    return list(dict.fromkeys(str(s["license"]).strip() for s in _sources_of(manifest) if s.get("license")))


def card_license(manifest: Mapping | None, override: str | None = None) -> CardLicense:
    """The card's licence. ``override`` (``--license``) is taken as an id; else the manifest's licence:
    a Hub id as it is, anything else ``other`` with ``license_name`` (the build config's, or a slug of
    its words) and ``license_link`` (the config's), its words kept for the card's text. Raises RMBError
    when nothing names a licence; ``check_card_license`` says whether the result may go on the Hub."""
    manifest = manifest or {}
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    stated = _stated(manifest)
    words = "; ".join(stated)
    name = manifest.get("license_name") or config.get("license_name") or license_slug(words)
    link = manifest.get("license_link") or config.get("license_link")
    if override:
        return CardLicense(override.strip().lower(), name, link, words)
    if not stated:
        raise RMBError(
            "refusing to publish: the release's manifest.json names no licence (neither 'license' "
            "nor 'sources[].license'); pass --license ID (e.g. --license cc-by-nc-4.0)"
        )
    ids = list(dict.fromkeys(hub_license_id(s) for s in stated))
    if None not in ids:
        return CardLicense(ids[0] if len(ids) == 1 else ids)
    return CardLicense("other", name, link, words)


def check_card_license(header: Mapping[str, Any]) -> None:
    """Refuse (RMBError, one line naming the field) a card header whose licence keys the Hub would not take."""
    ids = header.get("license") if isinstance(header.get("license"), list) else [header.get("license")]
    bad = next((i for i in ids if not isinstance(i, str) or i not in HUB_LICENSES), None) if ids else "[]"
    if bad is not None:
        close = get_close_matches(str(bad), sorted(HUB_LICENSES), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise RMBError(
            f"refusing to publish: the card's license {bad!r} is not a Hugging Face licence id{hint}; "
            f"use one of {LICENSES_URL}, or 'other' with license_name"
        )
    name, link = header.get("license_name"), header.get("license_link")
    if "other" not in ids:
        if name or link:
            raise RMBError(
                f"refusing to publish: the card's {'license_name' if name else 'license_link'} is "
                f"only for license 'other' (license is {header['license']!r})"
            )
    elif not isinstance(name, str) or not LICENSE_NAME.fullmatch(name):
        what = f"license_name {name!r} is not a licence id" if name else "license_name is missing"
        raise RMBError(
            f"refusing to publish: the card's {what}: with license 'other' it needs one such as "
            "'my-license-1.0' (lower-case letters, digits, '.', '_', '-'; the build config's license_name)"
        )
    elif link is not None and not (isinstance(link, str) and LICENSE_LINK.fullmatch(link)):
        raise RMBError(
            f"refusing to publish: the card's license_link {link!r} is neither a URL nor a file of the "
            "dataset's repository (such as LICENSE.md)"
        )


def resolve_license(manifest: dict | None, override: str | None = None) -> tuple[str | list[str], list[dict]]:
    """The card's ``license`` (``card_license``'s id) and the manifest's sources."""
    return card_license(manifest, override).id, _sources_of(manifest or {})


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` value for ``n`` rows."""
    labels = [
        "n<1K",
        "1K<n<10K",
        "10K<n<100K",
        "100K<n<1M",
        "1M<n<10M",
        "10M<n<100M",
        "100M<n<1B",
        "1B<n<10B",
        "10B<n<100B",
        "100B<n<1T",
    ]
    for power, label in enumerate(labels, start=3):
        if n < 10**power:
            return label
    return "n>1T"


def languages(release: Release) -> tuple[list[str], Counter]:
    """ISO codes for the Hub header, and the count of turns per language tag as the release spells it."""
    tags = Counter(t.language for it in release.items() for t in it.conversation if t.language)
    codes = []
    for tag, _ in tags.most_common():
        code = tag.lower() if len(tag) == 2 and tag.isalpha() else LANGUAGE_CODES.get(tag.strip().lower())
        if code and code not in codes:
            codes.append(code)
    return codes, tags


def card_header(release: Release, license_: str | list[str] | CardLicense, pretty_name: str) -> dict[str, Any]:
    """The YAML header: license (and with ``other`` its name and link), language, task categories,
    size category, and ``configs``."""
    codes, _ = languages(release)
    configs = [c for c in CONFIGS if any(True for _ in release.items(c))] + ([STYLE_SET] if release.style else [])
    n = sum(1 for _ in release.items())
    header: dict[str, Any] = (license_ if isinstance(license_, CardLicense) else CardLicense(license_)).header()
    if codes:
        header["language"] = codes
    header.update(
        {
            "task_categories": TASK_CATEGORIES,
            "tags": TAGS,
            "pretty_name": pretty_name,
            "size_categories": [size_category(n)],
            "configs": [
                {"config_name": c, "data_files": [{"split": SPLIT, "path": data_files_pattern(c)}]} for c in configs
            ],
        }
    )
    return header


def _table(header: list[str], rows: Iterable[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _scenario_table(release: Release) -> str:
    counts: dict[str, Counter] = {}
    for it in release.items():
        counts.setdefault(it.scenario_id, Counter())[it.set_name] += 1
    rows = [[f"`{sc}`", c[PAIRWISE_SET], c[BON_SET]] for sc, c in sorted(counts.items())]
    rows.append(["**total**", sum(c[PAIRWISE_SET] for c in counts.values()), sum(c[BON_SET] for c in counts.values())])
    return _table(["scenario", "pairwise", "bon"], rows)


def _model_table(release: Release) -> str:
    counts: dict[str, Counter] = {}
    for it in release.items():
        for a in it.answers():
            counts.setdefault(a.llm_name, Counter())[it.set_name] += 1
    rows = [
        [f"`{m}`", c[PAIRWISE_SET], c[BON_SET]]
        for m, c in sorted(counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    ]
    return _table(["model", "answers in pairwise", "answers in bon"], rows)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_describe(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(_describe(v) for v in value)
    return str(value)


def _judges(release: Release, annotations: list[dict]) -> str:
    manifest = release.manifest or {}
    models = manifest.get("models") if isinstance(manifest.get("models"), dict) else {}
    lines = []
    for key in ("judges", "judge", "guard"):
        for where in (manifest, models):
            if where.get(key):
                entries = where[key] if isinstance(where[key], list) else [where[key]]
                lines += [f"- {key.rstrip('s')}: {_describe(e)}" for e in entries]
    named = Counter(str(a[k]) for a in annotations for k in ("judge", "judge_model") if a.get(k))
    lines += [f"- `{name}` (named by {n} annotation lines)" for name, n in named.most_common()]
    scored = {k for keys in judge_scores(annotations)[1].values() for k in keys}
    if scored:
        lines.append(f"- judge scores are included as columns: {', '.join(f'`{k}`' for k in sorted(scored))}")
    return "\n".join(lines) or "The release records no judges (it has no judge annotations or manifest entry)."


def _audit(audit: AuditReport | dict | None) -> str:
    if audit is None:
        return "No audit was run."
    summary = audit.summary() if isinstance(audit, AuditReport) else audit
    counts = summary.get("counts", {})
    rows = [[f"`{k}`", counts.get(k, 0)] for k in (*DEFECT_KINDS, *sorted(set(counts) - set(DEFECT_KINDS)))]
    text = (
        "Defects found by `rmb audit` (definitions in `rmb_build.release.audit`); the items are "
        "published as they are.\n\n" + _table(["defect", "count"], rows)
    )
    text += f"\n\nTotal: {defects_phrase(summary.get('total', sum(counts.values())), summary.get('items_flagged'))}."
    for note in summary.get("notes", []):
        text += f"\n\nNote: {note}"
    return text


def _harm_evidence(harm: dict) -> str:
    """What a harmlessness label rests on: label sets (annotated by people or LLMs, as each says), the classifier at its measured threshold
    (and how sure that is at other base rates of harmful prompts), or the sources' own labels."""
    parts = [
        _label_set_paragraph(name, n, harm.get("label_sets", {}).get(name))
        # manifests written before the key said what it counts called it labelled_by_people
        for name, n in harm.get("labelled_by_label_set", harm.get("labelled_by_people", {})).items()
    ]
    if "labelled_by_sources" in harm:  # no classify stage: the sources' labels stand
        parts.append(
            f"**Harmlessness labels.** {harm['labelled_by_sources']} harmlessness queries carry their "
            "sources' own labels (no classify stage)."
        )
        return "\n\n".join(parts)
    lo, hi = harm["precision_ci95"]
    rates = ", ".join(f"{100 * p:.0f}% at {100 * float(b):g}%" for b, p in harm["precision_at_base_rate"].items())
    turned = sum(harm.get("turned_away", {}).values())
    measured = (
        f"on held-out prompts of {harm['measured_on']}, {100 * harm['precision']:.1f}% of those it called harmful at "
        f"P(harm) at least {harm['threshold']:.2f} were harmlessness prompts, 95% CI {100 * lo:.1f}-{100 * hi:.1f}, "
        f"recall {100 * harm['recall']:.0f}%. That precision depends on how common harmful prompts are (about a third "
        f"there): {rates} of harmful prompts"
    )
    if harm.get("classifier_is_evidence", True):
        parts.append(
            f"**Harmlessness needs evidence.** The classifier called {harm['classified_harmful']} prompts harmful; "
            f"{harm['kept']} kept that goal and {turned} were turned away to their most likely helpfulness scenario "
            f"(the guard's 'unsafe' verdict may still route a query to harmlessness). Its threshold: {measured}."
        )
    else:
        parts.append(
            f"**The classifier's harmlessness calls were not evidence in this build** "
            f"(`classifier.harm_from_classifier: false`): the {turned} prompts it called harmful took their most "
            f"likely helpfulness scenario. For reference, {measured}."
        )
    return "\n\n".join(parts)


def _label_set_paragraph(name: str, n: int, about: dict | None) -> str:
    """One label set's paragraph: how many queries rest on it, who labelled what, and what it measured."""
    text = (
        f"**Harmlessness from {_annotated_by(about)}.** {n} of the queries gathered carry a harmlessness label of "
        f"the label set `{name}`"
    )
    m = (about or {}).get("measured")
    if not m:
        return text + " (a user's file: how it was labelled is not recorded here)."
    kappa = m["cohen_kappa_harmful_vs_none"]["value"]
    rand, clf = m["harmful_in_random_draw"], m["classifier_at_threshold"]
    prec = clf["precision"]
    return (
        f"{text}: {about['what']} Annotators: {about['annotators']}. Of {m['reviewed']} prompts reviewed, "
        f"{m['both_harmful']} were harmful to both (Cohen's kappa {kappa:.2f}, harmful vs none), "
        f"{m['labelled']} are used. {rand['k']} of {rand['n']} prompts drawn at random were harmful "
        f"({100 * rand['share']:.1f}%, 95% CI {100 * rand['ci95'][0]:.1f}-{100 * rand['ci95'][1]:.1f}%); of the "
        f"{clf['called_harmful']} the embedding classifier calls harmful at P(harm) at least {clf['threshold']:.2f}, "
        f"{prec['k']} were ({100 * prec['share']:.1f}%, 95% CI {100 * prec['ci95'][0]:.1f}-"
        f"{100 * prec['ci95'][1]:.1f}%): on this corpus its calls are no evidence of harm."
    )


def _annotated_by(about: dict | None) -> str:
    """Who gave a label set's labels, as its ``annotated_by`` says; never "people" unless the set says so."""
    kind = (about or {}).get("annotated_by")
    return {
        "people": "people's labels",
        "llm": "an LLM-labelled set (no person checked it)",
        "mixed": "a label set labelled by people and LLMs",
    }.get(kind, "a label set (who labelled it is not recorded)")


def _figure(fig: dict | None) -> list[str]:
    """agreement (marked when over few items), n, interval."""
    if not fig:
        return ["—", "0", "—"]
    lo, hi = fig["ci95"]
    return [f"{fig['value']:.3f}{FEW_MARK if few_items(fig['n']) else ''}", str(fig["n"]), f"{lo:.3f}-{hi:.3f}"]


def _people(review: dict) -> str:
    """People's labels of this release (``rmb review export``'s agreement.json) as the card says them."""
    rows = []
    who = {"people's majority": review.get("majority", {})}
    who.update({f"annotator {name}": v for name, v in review.get("annotators", {}).items()})
    for label, figures in who.items():
        for set_name in (PAIRWISE_SET, BON_SET):
            f = figures.get(set_name)
            if not f:
                continue
            rows.append([label, set_name, "overall", *_figure(f.get("overall"))])
            rows += [[label, set_name, g, *_figure(v)] for g, v in f.get("goals", {}).items()]
    between = []
    for set_name, entry in review.get("between_people", {}).items():
        alpha = entry.get("krippendorff_alpha", {})
        said = f"{alpha['value']:.3f}" if alpha.get("value") is not None else alpha.get("note", "not measured")
        between.append(f"{set_name}: Krippendorff's alpha {said} over {alpha.get('units', 0)} items")
        kappa = entry.get("cohen_kappa")
        if kappa:
            said = f"{kappa['value']:.3f}" if kappa.get("value") is not None else kappa.get("note", "")
            between.append(f"{set_name}: Cohen's kappa {said} over {kappa.get('n', 0)} items")
    gold = review.get("gold", {})
    text = (
        f"**People against this release's labels.** {review.get('labels', 0)} labels by people of "
        f"{review.get('items', 0)} items of this release (`rmb review`): agreeing with the release's "
        "chosen or best answer counts 1, the other side 0, a tie 0.5 (both unacceptable, skipped and "
        "can't-judge labels are left out), with a 95% interval (Clopper-Pearson, never of zero width). "
        f"Items where the people's majority overruled the release: {len(review.get('overruled', []))}; "
        f"items two or more people agreed on (the review's gold release): {gold.get('items', 0)}."
    )
    if rows:
        text += "\n\n" + _table(["who", "set", "group", "agreement", "n", "95% interval"], rows)
    text += "\n\nBetween people: " + ("; ".join(between) if between else "no item was labelled by two people") + "."
    return text


def _label_checks(manifest: dict, review: dict | None = None) -> str:
    """How far the labels can be trusted: the judge against gold labels, people against this release's
    labels (when a review is given), and where goals came from."""
    from rmb_build.release.gold_report import table, verdict_on_chance

    parts = []
    harm = manifest.get("harm_evidence")
    if isinstance(harm, dict):
        parts.append(_harm_evidence(harm))
    gold = manifest.get("gold")
    if isinstance(gold, dict):
        parts.append(
            f"**Judge against human labels.** Before generating, the build's judge (and guard) scored "
            f"{gold.get('items', 0)} pairwise items of `{gold.get('release')}` exactly as it scored this "
            "release's answers; agreement is the share of pairs where the build would prefer the "
            "labelled chosen answer (ties count half, so chance is 0.5), with a 95% interval "
            "(Clopper-Pearson, never of zero width).\n\n" + table(gold) + "\n\n" + verdict_on_chance(gold)
        )
    else:
        parts.append(
            "The judge's agreement with human-labelled pairs was not measured for this release "
            "(no `judge.gold` in its build config)."
        )
    if review:
        parts.append(_people(review))
    routing = manifest.get("routing")
    if isinstance(routing, dict):
        items = routing.get("items", {})
        queries = routing.get("queries", {})
        goal_from, cat_from = items.get("goal_from", {}), items.get("category_from", {})
        disagreed = items.get("disagreed", {})
        parts.append(
            f"**Goals from the guard.** Each query's prompt was guarded ({queries.get('guarded', 0)} prompts; "
            f"verdicts {_describe(queries.get('verdicts', {})) or 'none'}). Items whose goal came from the guard: "
            f"{goal_from.get('guard', 0)}; from the classifier alone (no readable verdict): "
            f"{goal_from.get('classifier', 0)}; from a label set (which a verdict does not "
            f"change): {goal_from.get('label_set', 0)}"
            + (
                f" ('unsafe' verdicts not taken as evidence of harm: {_describe(queries['unsafe_not_evidence'])})"
                if queries.get("unsafe_not_evidence")
                else ""
            )
            + f". Harm category / scenario from the guard: {cat_from.get('guard', 0)}; "
            f"from the classifier: {cat_from.get('classifier', 0)}; from a label set: "
            f"{cat_from.get('label_set', 0)}. Items where guard and classifier disagreed: "
            + (_describe(disagreed) if disagreed else "none")
            + ". Queries dropped by routing: "
            + (_describe(queries.get("dropped", {})) if queries.get("dropped") else "none")
            + "."
        )
    return "\n\n".join(parts)


def _selection(manifest: dict) -> str:
    """Pairs per query and the histogram of judge-score gaps for each set, from the manifest's ``sets``."""
    sets = manifest.get("sets") if isinstance(manifest.get("sets"), dict) else None
    if not sets:
        return "The release's manifest does not record how its items were selected."
    text = (
        f"Pairs were drawn with policy `{sets.get('pair_policy', '?')}` (at most "
        f"{sets.get('max_pairs_per_query', '?')} per query; each pair's judge-score gap at least "
        f"{sets.get('margin', '?')}, or a safe answer over an unsafe one in harmlessness)."
    )
    queries = (manifest.get("accounting") or {}).get("queries") or {}
    for goal, short in (queries.get("short_of_min_per_goal") or {}).items():
        text += (
            f" **{goal} is short**: {short['selected']} queries selected of the {short['wanted']} wanted "
            f"(`select.min_per_goal`), from {short['with_evidence']} in the pool with evidence for that goal "
            "(`select.per_scenario`, `select.total` and routing decide how many of those go on); none was "
            "filled in without evidence."
        )
    if sets.get("unreadable_verdicts") == "judge_only":
        text += (
            " **Harmlessness answers without a readable guard verdict were kept and compared only with "
            "each other, by the judge's score alone** (`sets.unreadable_verdicts: judge_only`): their "
            "safety was never established."
        )
    else:
        text += " Harmlessness answers without a readable guard verdict were compared with no other answer."
    for set_name in (PAIRWISE_SET, BON_SET):
        s = sets.get(set_name) or {}
        if not s.get("items"):
            continue
        per_query = ", ".join(f"{n} item(s): {q} queries" for n, q in (s.get("per_query") or {}).items())
        text += (
            f"\n\n**{set_name}**: {s['items']} items over {s.get('queries', '?')} queries "
            f"(mean {s.get('mean_per_query', '?')} per query; {per_query}).\n\n"
        )
        gaps = s.get("score_gaps") or {}
        text += (
            _table(["score gap", "count"], ([g, n] for g, n in gaps.items()))
            if gaps
            else "No judge-score gaps recorded."
        )
    return text


def _cast(manifest: dict) -> str:
    """Which preflight checks on the cast (self-judging, distinct generators) the build's config relaxed."""
    cast = manifest.get("cast") if isinstance(manifest.get("cast"), dict) else None
    if not cast:
        return "The release's manifest does not record the preflight checks on its models."
    if not cast.get("relaxed"):
        return (
            f"The judge wrote none of the answers, and the answers come from {cast.get('distinct_generator_models')} "
            f"distinct models (at least {cast.get('min_generators')} required)."
        )
    return (
        "**The build relaxed the checks on its models**, so its labels are weaker than a benchmark's should be:\n\n"
        + "\n".join(f"- {note}" for note in cast["relaxed"])
    )


def _licence_text(lic: CardLicense) -> str:
    """The licence line under the sources: the build's own words where the Hub id cannot carry them."""
    if not lic.other or not lic.statement:
        return ""
    link = f" Terms: <{lic.link}>." if lic.link else ""
    return (
        f"\n\n**Licence**, as the build states it: {lic.statement.rstrip('.')}.{link} The Hub lists no id for "
        f"it: this card's metadata says `license: other`, `license_name: {lic.name}`."
    )


def _sources(sources: list[dict]) -> str:
    if not sources:
        return "The release's manifest lists no query sources."

    def first(s: dict, *keys: str) -> Any:
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
    return _table(["source", "where", "licence", "queries kept"], rows)


def render_card(
    release: Release,
    *,
    repo_id: str,
    license: str | None = None,
    audit: AuditReport | dict | None = None,
    annotations: list[dict] | None = None,
    title: str | None = None,
    review: dict | None = None,
) -> str:
    """The full ``README.md``: YAML header, then the text of ``prompts/dataset_card.md`` filled in
    (``review``: ``rmb review export``'s agreement.json, people's agreement with the labels).

    Raises RMBError (``card_license``, ``check_card_license``) when nothing names a licence or the
    card's licence would not be valid on the Hub.
    """
    from rmb_build.core.prompting import load_prompt

    lic = card_license(release.manifest, license)
    check_card_license(lic.header())
    sources = _sources_of(release.manifest or {})
    annotations = release.annotations() if annotations is None else annotations
    title = title or (release.manifest or {}).get("name") or release.name
    scores = sorted({k for keys in judge_scores(annotations)[1].values() for k in keys})
    body = fill(
        load_prompt(CARD_TEMPLATE),
        title=title,
        repo_id=repo_id,
        origin=str((release.manifest or {}).get("description", "")),
        n_pairwise=sum(1 for _ in release.items(PAIRWISE_SET)),
        n_bon=sum(1 for _ in release.items(BON_SET)),
        n_scenarios=len({it.scenario_id for it in release.items()}),
        score_columns=(", and judge scores " + ", ".join(f"`{k}`" for k in scores)) if scores else "",
        scenario_table=_scenario_table(release),
        model_table=_model_table(release),
        judges=_judges(release, annotations),
        audit=_audit(audit),
        sources=_sources(sources) + _licence_text(lic),
        label_checks=_label_checks(release.manifest or {}, review),
        selection=_selection(release.manifest or {}),
        cast=_cast(release.manifest or {}),
        license=lic.name if lic.other else lic.id if isinstance(lic.id, str) else ", ".join(lic.id),
    )
    header = yaml.safe_dump(card_header(release, lic, title), sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n{body}\n"


__all__ = [
    "HUB_LICENSES",
    "CardLicense",
    "card_header",
    "card_license",
    "check_card_license",
    "hub_license_id",
    "license_slug",
    "render_card",
    "resolve_license",
    "size_category",
]
