"""The dataset card (``README.md``) of a release's Hugging Face form: the Hub's YAML header and the text.

The text comes from ``prompts/dataset_card.md``, a Jinja2 template filled by ``rmb_build.core.text.fill``;
``licence`` resolves and checks the licence, ``header`` makes the YAML header, and ``contents``, ``trust``
and ``selection`` write the sections.
"""

from __future__ import annotations

import yaml

from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET
from rmb_build.core.text import fill
from rmb_build.release.audit import AuditReport
from rmb_build.release.card.contents import (
    audit_section,
    judges,
    licence_text,
    model_table,
    scenario_table,
    sources_table,
)
from rmb_build.release.card.header import card_header, size_category
from rmb_build.release.card.licence import (
    HUB_LICENSES,
    LICENSE_LINK,
    LICENSE_NAME,
    CardLicense,
    card_license,
    check_card_license,
    hub_license_id,
    license_slug,
    resolve_license,
    sources_of,
)
from rmb_build.release.card.selection import cast_checks, selection
from rmb_build.release.card.trust import label_checks
from rmb_build.release.hf import judge_scores
from rmb_build.release.manifest_model import Manifest
from rmb_build.release.read import Release

CARD_TEMPLATE = "dataset_card.md"


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

    manifest = Manifest.from_json(release.manifest)
    lic = card_license(manifest, license)
    check_card_license(lic.header())
    annotations = release.annotations() if annotations is None else annotations
    title = title or manifest.name or release.name
    scores = sorted({k for keys in judge_scores(annotations)[1].values() for k in keys})
    body = fill(
        load_prompt(CARD_TEMPLATE),
        title=title,
        repo_id=repo_id,
        origin=manifest.description or "",
        n_pairwise=sum(1 for _ in release.items(PAIRWISE_SET)),
        n_bon=sum(1 for _ in release.items(BON_SET)),
        n_scenarios=len({it.scenario_id for it in release.items()}),
        score_columns=(", and judge scores " + ", ".join(f"`{k}`" for k in scores)) if scores else "",
        scenario_table=scenario_table(release),
        model_table=model_table(release),
        judges=judges(manifest, annotations),
        audit=audit_section(audit),
        sources=sources_table(sources_of(manifest)) + licence_text(lic),
        label_checks=label_checks(manifest, review),
        selection=selection(manifest),
        cast=cast_checks(manifest),
        license=lic.name if lic.other else lic.id if isinstance(lic.id, str) else ", ".join(lic.id),
    )
    header = yaml.safe_dump(card_header(release, lic, title), sort_keys=False, allow_unicode=True)
    return f"---\n{header}---\n\n{body}\n"


__all__ = [
    "HUB_LICENSES",
    "LICENSE_LINK",
    "LICENSE_NAME",
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
