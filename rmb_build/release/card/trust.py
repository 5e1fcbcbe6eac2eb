"""The card's section on how far the labels can be trusted: where harmlessness labels came from, the
judge against gold labels, people against the release (``rmb review``) and goals routed by the guard."""

from __future__ import annotations

from typing import TypeVar

from rmb_build.core.errors import InputError
from rmb_build.core.intervals import FEW_MARK, few_items
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.release.card.markdown import describe, table
from rmb_build.release.gold_report import table as gold_table
from rmb_build.release.gold_report import verdict_on_chance
from rmb_build.release.manifest_model import HarmEvidence, Manifest
from rmb_build.release.read import MANIFEST_FILE

_T = TypeVar("_T")


def _measured(value: _T | None, field: str) -> _T:
    """A figure of the classifier's measurement the card states; a manifest holding null there is refused."""
    if value is None:
        raise InputError(MANIFEST_FILE, "null: the dataset card states this figure", field=f"harm_evidence.{field}")
    return value


def harm_evidence(harm: HarmEvidence) -> str:
    """What a harmlessness label rests on: label sets (annotated by people or LLMs, as each says), the classifier at its measured threshold
    (and how sure that is at other base rates of harmful prompts), or the sources' own labels."""
    parts = [label_set_paragraph(name, n, harm.label_sets.get(name)) for name, n in harm.labelled_by_label_set.items()]
    if harm.labelled_by_sources is not None:  # no classify stage: the sources' labels stand
        parts.append(
            f"**Harmlessness labels.** {harm.labelled_by_sources} harmlessness queries carry their "
            "sources' own labels (no classify stage)."
        )
        return "\n\n".join(parts)
    lo, hi = _measured(harm.precision_ci95, "precision_ci95")
    precision, recall = _measured(harm.precision, "precision"), _measured(harm.recall, "recall")
    threshold = _measured(harm.threshold, "threshold")
    rates = ", ".join(f"{100 * p:.0f}% at {100 * float(b):g}%" for b, p in harm.precision_at_base_rate.items())
    turned = sum(harm.turned_away.values())
    measured = (
        f"on held-out prompts of {harm.measured_on}, {100 * precision:.1f}% of those it called harmful at "
        f"P(harm) at least {threshold:.2f} were harmlessness prompts, 95% CI {100 * lo:.1f}-{100 * hi:.1f}, "
        f"recall {100 * recall:.0f}%. That precision depends on how common harmful prompts are (about a third "
        f"there): {rates} of harmful prompts"
    )
    if harm.classifier_is_evidence:
        parts.append(
            f"**Harmlessness needs evidence.** The classifier called {harm.classified_harmful} prompts harmful; "
            f"{harm.kept} kept that goal and {turned} were turned away to their most likely helpfulness scenario "
            f"(the guard's 'unsafe' verdict may still route a query to harmlessness). Its threshold: {measured}."
        )
    else:
        parts.append(
            f"**The classifier's harmlessness calls were not evidence in this build** "
            f"(`classifier.harm_from_classifier: false`): the {turned} prompts it called harmful took their most "
            f"likely helpfulness scenario. For reference, {measured}."
        )
    return "\n\n".join(parts)


def label_set_paragraph(name: str, n: int, about: dict | None) -> str:
    """One label set's paragraph: how many queries rest on it, who labelled what, and what it measured."""
    text = (
        f"**Harmlessness from {annotated_by(about)}.** {n} of the queries gathered carry a harmlessness label of "
        f"the label set `{name}`"
    )
    known = about or {}
    m = known.get("measured")
    if not m:
        return text + " (a user's file: how it was labelled is not recorded here)."
    kappa = m["cohen_kappa_harmful_vs_none"]["value"]
    rand, clf = m["harmful_in_random_draw"], m["classifier_at_threshold"]
    prec = clf["precision"]
    return (
        f"{text}: {known['what']} Annotators: {known['annotators']}. Of {m['reviewed']} prompts reviewed, "
        f"{m['both_harmful']} were harmful to both (Cohen's kappa {kappa:.2f}, harmful vs none), "
        f"{m['labelled']} are used. {rand['k']} of {rand['n']} prompts drawn at random were harmful "
        f"({100 * rand['share']:.1f}%, 95% CI {100 * rand['ci95'][0]:.1f}-{100 * rand['ci95'][1]:.1f}%); of the "
        f"{clf['called_harmful']} the embedding classifier calls harmful at P(harm) at least {clf['threshold']:.2f}, "
        f"{prec['k']} were ({100 * prec['share']:.1f}%, 95% CI {100 * prec['ci95'][0]:.1f}-"
        f"{100 * prec['ci95'][1]:.1f}%): on this corpus its calls are no evidence of harm."
    )


def annotated_by(about: dict | None) -> str:
    """Who gave a label set's labels, as its ``annotated_by`` says; never "people" unless the set says so."""
    kind = (about or {}).get("annotated_by")
    return {
        "people": "people's labels",
        "llm": "an LLM-labelled set (no person checked it)",
        "mixed": "a label set labelled by people and LLMs",
    }.get(kind if isinstance(kind, str) else "", "a label set (who labelled it is not recorded)")


def figure(fig: dict | None) -> list[str]:
    """agreement (marked when over few items), n, interval."""
    if not fig:
        return ["—", "0", "—"]
    lo, hi = fig["ci95"]
    return [f"{fig['value']:.3f}{FEW_MARK if few_items(fig['n']) else ''}", str(fig["n"]), f"{lo:.3f}-{hi:.3f}"]


def people(review: dict) -> str:
    """People's labels of this release (``rmb review export``'s agreement.json) as the card says them."""
    rows = []
    who = {"people's majority": review.get("majority", {})}
    who.update({f"annotator {name}": v for name, v in review.get("annotators", {}).items()})
    for label, figures in who.items():
        for set_name in (PAIRWISE_SET, BON_SET):
            f = figures.get(set_name)
            if not f:
                continue
            rows.append([label, set_name, "overall", *figure(f.get("overall"))])
            rows += [[label, set_name, g, *figure(v)] for g, v in f.get("goals", {}).items()]
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
        "can't-judge labels are left out), with a 95% interval (mid-p, never of zero width). "
        f"Items where the people's majority overruled the release: {len(review.get('overruled', []))}; "
        f"items two or more people agreed on (the review's gold release): {gold.get('items', 0)}."
    )
    if rows:
        text += "\n\n" + table(["who", "set", "group", "agreement", "n", "95% interval"], rows)
    text += "\n\nBetween people: " + ("; ".join(between) if between else "no item was labelled by two people") + "."
    return text


def label_checks(manifest: Manifest, review: dict | None = None) -> str:
    """How far the labels can be trusted: the judge against gold labels, people against this release's
    labels (when a review is given), and where goals came from."""
    parts = []
    harm = manifest.harm_evidence
    if harm is not None:
        parts.append(harm_evidence(harm))
    gold = manifest.gold
    if gold is not None:
        parts.append(
            f"**Judge against human labels.** Before generating, the build's judge (and guard) scored "
            f"{gold.get('items', 0)} pairwise items of `{gold.get('release')}` exactly as it scored this "
            "release's answers; agreement is the share of pairs where the build would prefer the "
            "labelled chosen answer (ties count half, so chance is 0.5), with a 95% interval "
            "(mid-p, never of zero width).\n\n" + gold_table(gold) + "\n\n" + verdict_on_chance(gold)
        )
    else:
        parts.append(
            "The judge's agreement with human-labelled pairs was not measured for this release "
            "(no `judge.gold` in its build config)."
        )
    if review:
        parts.append(people(review))
    routing = manifest.routing
    if routing is not None:
        items = routing.get("items", {})
        queries = routing.get("queries", {})
        goal_from, cat_from = items.get("goal_from", {}), items.get("category_from", {})
        disagreed = items.get("disagreed", {})
        parts.append(
            f"**Goals from the guard.** Each query's prompt was guarded ({queries.get('guarded', 0)} prompts; "
            f"verdicts {describe(queries.get('verdicts', {})) or 'none'}). Items whose goal came from the guard: "
            f"{goal_from.get('guard', 0)}; from the classifier alone (no readable verdict): "
            f"{goal_from.get('classifier', 0)}; from a label set (which a verdict does not "
            f"change): {goal_from.get('label_set', 0)}"
            + (
                f" ('unsafe' verdicts not taken as evidence of harm: {describe(queries['unsafe_not_evidence'])})"
                if queries.get("unsafe_not_evidence")
                else ""
            )
            + f". Harm category / scenario from the guard: {cat_from.get('guard', 0)}; "
            f"from the classifier: {cat_from.get('classifier', 0)}; from a label set: "
            f"{cat_from.get('label_set', 0)}. Items where guard and classifier disagreed: "
            + (describe(disagreed) if disagreed else "none")
            + ". Queries dropped by routing: "
            + (describe(queries.get("dropped", {})) if queries.get("dropped") else "none")
            + "."
            + (f" The guard's replies were mostly unreadable: {queries['stopped']}." if queries.get("stopped") else "")
        )
    return "\n\n".join(parts)
