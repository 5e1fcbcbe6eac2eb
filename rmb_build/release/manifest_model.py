"""The release manifest (``manifest.json``) as typed records: the build's writer
(``pipeline/manifest.build_manifest``) fills them and the dataset card reads their attributes.

A section the card reads that is present but lacks a key the card needs is refused in one line naming the
key (``InputError``); an absent section is None, and a key the card can do without has its default here.
Sections the card does not read are carried as the writer gave them, so ``Manifest.to_json`` is the JSON a
build writes. Manifests of earlier versions load too (``labelled_by_people``; top-level ``judges``,
``judge`` and ``guard``; no ``cast`` or ``sets``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

from rmb_build.core.errors import InputError
from rmb_build.release.read import MANIFEST_FILE

CHECKS = (
    "harm_evidence",
    "gold",
    "routing",
    "style",
)  # the label checks' sections and the style stage's accounting, written between audit and config
_MISSING = object()


def _section(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    """``data[key]`` as a mapping; None when absent or null; refused when it is not a mapping."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(MANIFEST_FILE, f"expected a mapping, got {type(value).__name__}", field=f"{where}{key}")
    return value


def _need(data: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> Any:
    """``data[key]``; without a default, a missing key is refused in one line naming it."""
    if key in data:
        return data[key]
    if default is _MISSING:
        raise InputError(MANIFEST_FILE, "missing: the dataset card needs it", field=f"{where}{key}")
    return default


def _check_share(value: object, field: str) -> None:
    """A figure the card states as a share: null (refused where the card reads it) or a number in [0, 1]."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise InputError(MANIFEST_FILE, f"{value!r} is not a number from 0 to 1", field=field)


@dataclass(frozen=True)
class CastSection:
    """The preflight checks on the cast (``cast``): distinct generator models, the minimum, and which
    checks the config relaxed (each a sentence)."""

    distinct_generator_models: int
    min_generators: int
    relaxed: list[str]
    allow_self_judging: bool | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "cast.") -> CastSection:
        return cls(
            _need(data, "distinct_generator_models", where),
            _need(data, "min_generators", where),
            list(_need(data, "relaxed", where, [])),
            _need(data, "allow_self_judging", where, None),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "distinct_generator_models": self.distinct_generator_models,
            "min_generators": self.min_generators,
            "allow_self_judging": self.allow_self_judging,
            "relaxed": self.relaxed,
        }


@dataclass(frozen=True)
class SetFigures:
    """One set's figures under ``sets``: items, queries, items per query (a histogram and the mean) and
    the judge-score gaps (a histogram). None: not recorded; no items: the card skips the set."""

    items: int = 0
    queries: int | None = None
    per_query: dict[str, int] = field(default_factory=dict)
    mean_per_query: float | None = None
    score_gaps: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> SetFigures:
        return cls(
            _need(data, "items", where, 0),
            _need(data, "queries", where, None),
            dict(_need(data, "per_query", where, None) or {}),
            _need(data, "mean_per_query", where, None),
            dict(_need(data, "score_gaps", where, None) or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "queries": self.queries,
            "per_query": self.per_query,
            "mean_per_query": self.mean_per_query,
            "score_gaps": self.score_gaps,
        }


@dataclass(frozen=True)
class SetsSection:
    """How pairs were drawn (``sets``): the policy and its limits, and each set's figures. None: not recorded."""

    pair_policy: str | None = None
    max_pairs_per_query: int | None = None
    margin: float | None = None
    unreadable_verdicts: str | None = None
    pairwise: SetFigures | None = None
    bon: SetFigures | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "sets.") -> SetsSection:
        figures = {}
        for set_name in ("pairwise", "bon"):
            part = _section(data, set_name, where)
            figures[set_name] = SetFigures.from_json(part, f"{where}{set_name}.") if part else None
        return cls(
            _need(data, "pair_policy", where, None),
            _need(data, "max_pairs_per_query", where, None),
            _need(data, "margin", where, None),
            _need(data, "unreadable_verdicts", where, None),
            **figures,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pair_policy": self.pair_policy,
            "max_pairs_per_query": self.max_pairs_per_query,
            "margin": self.margin,
            "unreadable_verdicts": self.unreadable_verdicts,
            **{s: f.to_json() for s, f in (("pairwise", self.pairwise), ("bon", self.bon)) if f is not None},
        }


@dataclass(frozen=True)
class ShortGoal:
    """A goal with fewer selected queries than ``select.min_per_goal`` wanted."""

    wanted: int
    selected: int
    with_evidence: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> ShortGoal:
        return cls(*(_need(data, k, where) for k in ("wanted", "selected", "with_evidence")))


@dataclass(frozen=True)
class HarmEvidence:
    """What harmlessness labels rest on (``harm_evidence``): label sets (``labelled_by_label_set``, with
    what each set says of itself in ``label_sets``), the sources' own labels (``labelled_by_sources``,
    a build without classify), or the classifier at its measured threshold (the other fields, needed
    when the sources' labels are not the evidence)."""

    labelled_by_label_set: dict[str, int] = field(default_factory=dict)
    label_sets: dict[str, dict] = field(default_factory=dict)
    labelled_by_sources: int | None = None
    threshold: float | None = None
    classified_harmful: int | None = None
    kept: int | None = None
    turned_away: dict[str, int] = field(default_factory=dict)
    classifier_is_evidence: bool = True
    precision: float | None = None
    precision_ci95: list[float] | None = None
    recall: float | None = None
    precision_at_base_rate: dict[str, float] = field(default_factory=dict)
    measured_on: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "harm_evidence.") -> HarmEvidence:
        # manifests written before the key said what it counts called it labelled_by_people
        by_set = data.get("labelled_by_label_set", data.get("labelled_by_people", {}))
        with_common = functools.partial(
            cls,
            labelled_by_label_set=dict(by_set),
            label_sets=dict(data.get("label_sets", {})),
            turned_away=dict(data.get("turned_away", {})),
        )
        if "labelled_by_sources" in data:  # no classify stage: the classifier's figures are not read
            return with_common(labelled_by_sources=data["labelled_by_sources"])
        need = ("threshold", "classified_harmful", "kept", "precision", "precision_ci95", "recall", "measured_on")
        values = {k: _need(data, k, where) for k in need}
        for key in ("threshold", "precision", "recall"):
            _check_share(values[key], f"{where}{key}")
        ci = values["precision_ci95"]
        if ci is not None:
            if not isinstance(ci, (list, tuple)) or len(ci) != 2:
                raise InputError(MANIFEST_FILE, "not an interval [low, high]", field=f"{where}precision_ci95")
            for bound in ci:
                if bound is None:
                    raise InputError(MANIFEST_FILE, "a bound is null", field=f"{where}precision_ci95")
                _check_share(bound, f"{where}precision_ci95")
            if ci[0] > ci[1]:
                raise InputError(MANIFEST_FILE, "its low bound is above its high one", field=f"{where}precision_ci95")
        return with_common(
            **values,
            precision_at_base_rate=dict(_need(data, "precision_at_base_rate", where)),
            classifier_is_evidence=data.get("classifier_is_evidence", True),
        )


@dataclass(frozen=True)
class Manifest:
    """A release's manifest. The card reads ``name``, ``description``, the licence keys, ``sources``,
    ``models`` (and the older top-level ``judges``/``judge``/``guard``), ``cast``, ``sets``,
    ``short_of_min_per_goal`` (from ``accounting``) and the label checks (``harm_evidence``, ``gold``,
    ``routing``); the rest is carried for ``to_json``. ``checks`` holds the label checks' sections as
    written, in order."""

    name: str | None = None
    schema_version: int | None = None
    built_with: str | None = None
    created: str | None = None
    counts: Mapping[str, Any] = field(default_factory=dict)
    accounting: Mapping[str, Any] = field(default_factory=dict)
    sources: list[Any] = field(default_factory=list)
    license: str | None = None
    models: Mapping[str, Any] = field(default_factory=dict)
    cast: CastSection | None = None
    sets: SetsSection | None = None
    prompts: Mapping[str, str] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
    stages: list[Any] = field(default_factory=list)
    embeddings: Mapping[str, Any] | None = None
    failures: Mapping[str, Any] = field(default_factory=dict)
    audit: Mapping[str, Any] = field(default_factory=dict)
    checks: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None  # a hand-made manifest's words on where the release came from
    license_name: str | None = None
    license_link: str | None = None
    legacy_judges: dict[str, Any] = field(default_factory=dict)  # top-level judges/judge/guard, as older versions wrote

    @property
    def harm_evidence(self) -> HarmEvidence | None:
        harm = _section(self.checks, "harm_evidence", "")
        return HarmEvidence.from_json(harm) if harm is not None else None

    @property
    def gold(self) -> Mapping[str, Any] | None:
        """The judge against a labelled release (``stages/gold``; read by ``release.gold_report``)."""
        return _section(self.checks, "gold", "")

    @property
    def routing(self) -> Mapping[str, Any] | None:
        return _section(self.checks, "routing", "")

    @property
    def short_of_min_per_goal(self) -> dict[str, ShortGoal]:
        queries = (self.accounting or {}).get("queries") or {}
        where = "accounting.queries.short_of_min_per_goal."
        return {
            goal: ShortGoal.from_json(short, f"{where}{goal}.")
            for goal, short in (queries.get("short_of_min_per_goal") or {}).items()
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Manifest:
        """A manifest from its JSON (None or ``{}``: a release without one). Refuses, in one line naming the
        key, a section the card reads that lacks a key it needs."""
        data = data or {}
        if not isinstance(data, Mapping):
            raise InputError(MANIFEST_FILE, f"expected a JSON object, got {type(data).__name__}")
        cast, sets = _section(data, "cast", ""), _section(data, "sets", "")
        sources = data.get("sources")
        config = data.get("config")
        models = data.get("models")
        accounting = data.get("accounting")
        text = {k: data[k] if isinstance(data.get(k), str) else None for k in ("name", "license")}
        manifest = cls(
            **text,
            schema_version=data.get("schema_version"),
            built_with=data.get("built_with"),
            created=data.get("created"),
            counts=data.get("counts") or {},
            accounting=accounting if isinstance(accounting, Mapping) else {},
            sources=list(sources) if isinstance(sources, list) else [],
            models=models if isinstance(models, Mapping) else {},
            cast=CastSection.from_json(cast) if cast else None,
            sets=SetsSection.from_json(sets) if sets else None,
            prompts=data.get("prompts") or {},
            usage=data.get("usage") or {},
            stages=list(data.get("stages") or []),
            embeddings=data.get("embeddings"),
            failures=data.get("failures") or {},
            audit=data.get("audit") or {},
            checks={k: data[k] for k in CHECKS if k in data},
            config=config if isinstance(config, Mapping) else {},
            description=str(data["description"]) if "description" in data else None,
            license_name=data.get("license_name"),
            license_link=data.get("license_link"),
            legacy_judges={k: data[k] for k in ("judges", "judge", "guard") if data.get(k)},
        )
        manifest.harm_evidence, manifest.short_of_min_per_goal  # noqa: B018 - refuse a bad section now
        return manifest

    def to_json(self) -> dict[str, Any]:
        """The manifest as a build writes it."""
        return {
            "schema_version": self.schema_version,
            "name": self.name,
            "built_with": self.built_with,
            "created": self.created,
            "counts": self.counts,
            "accounting": self.accounting,
            "sources": self.sources,
            "license": self.license,
            "models": self.models,
            "cast": self.cast.to_json() if self.cast else {},
            "sets": self.sets.to_json() if self.sets else {},
            "prompts": self.prompts,
            "usage": self.usage,
            "stages": self.stages,
            **({"embeddings": self.embeddings} if self.embeddings is not None else {}),
            "failures": self.failures,
            "audit": self.audit,
            **self.checks,
            "config": self.config,
        }


__all__ = ["CastSection", "HarmEvidence", "Manifest", "SetFigures", "SetsSection", "ShortGoal"]
