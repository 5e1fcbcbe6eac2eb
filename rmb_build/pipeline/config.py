"""The build config (YAML): endpoints, generators, judge, guard, sources and stage settings.

Validated with pydantic before anything runs; a wrong type, an unknown key or a missing endpoint
fails with a ConfigError that names the file and the field. The keys ``name, endpoints, generators,
judge, guard`` are a fixed contract: other tools read them.
"""

from __future__ import annotations

import os
import re
from difflib import get_close_matches
from typing import Literal, TypeVar, get_args, get_origin

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rmb_build.core.errors import ConfigError
from rmb_build.core.options import StrictModel
from rmb_build.core.yaml_file import read_yaml
from rmb_build.llm.config import EndpointConfig, ModelRef
from rmb_build.pipeline import stages as build_stages
from rmb_build.stages.options import (
    ClassifierConfig,
    DedupConfig,
    EmbeddingsConfig,
    GeneratorConfig,
    GuardConfig,
    JudgeConfig,
    RouteConfig,
    SelectConfig,
    SetsConfig,
    SourceConfig,
    StyleConfig,
)
from rmb_build.stages.spec import Position

M = TypeVar("M", bound=BaseModel)


def folder_name(v: str) -> str:
    """A config's ``name``, which names folders: letters, digits, '.', '_' and '-' (ValueError otherwise)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", v):
        raise ValueError(f"{v!r}: use letters, digits, '.', '_' and '-' (it names folders)")
    return v


class RunConfig(StrictModel):
    task_runner: Literal["thread", "dask"] = "thread"
    dask_address: str | None = None
    batch_size: int = Field(default=200, ge=1)
    max_cost: float | None = Field(default=None, ge=0)
    max_queries: int | None = Field(default=None, ge=1)


class BuildConfig(StrictModel):
    name: str
    endpoints: dict[str, EndpointConfig]
    generators: list[GeneratorConfig] = Field(min_length=1)
    min_generators: int = Field(default=4, ge=1, description="distinct generator models (endpoint+model) a build needs")
    judge: JudgeConfig
    guard: GuardConfig
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig)
    sources: list[SourceConfig] = Field(default_factory=list)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    sets: SetsConfig = Field(default_factory=SetsConfig)
    select: SelectConfig = Field(default_factory=SelectConfig)
    route: RouteConfig = Field(default_factory=RouteConfig)
    style: StyleConfig | None = Field(default=None, description="style variants of the pairwise items (Style_set/)")
    run: RunConfig = Field(default_factory=RunConfig)
    stages: list[str] = Field(default_factory=lambda: list(build_stages.listed()))
    scenarios: list[str] | None = Field(default=None, description="build only these scenario ids")
    license: str | None = Field(
        default=None,
        description="the release's licence: a Hugging Face licence id "
        "(apache-2.0, cc-by-4.0, ...) or its terms in words (the card then says 'other')",
    )
    license_name: str | None = Field(
        default=None,
        description="for a licence the Hub does not list: its id on "
        "the card (e.g. my-license-1.0); default: the licence's words, hyphenated",
    )
    license_link: str | None = Field(
        default=None,
        description="for a licence the Hub does not list: a URL (or a file of the dataset's repository) with its terms",
    )

    def model_identity(self, ref: ModelRef) -> tuple[str, str]:
        """What makes two references the same model: the server behind the endpoint (its embedded model
        or its URL, so two endpoint names for one server are one) and the model name."""
        ep = self.endpoints[ref.endpoint]
        server = f"embedded:{ep.embedded}" if ep.embedded else (ep.base_url or "").rstrip("/")
        return server, ref.model

    def check_cast(self, file: str = "<config>", *, judging: bool = True) -> None:
        """At least ``min_generators`` distinct generator models, and (when ``judging``) a judge that is
        none of them unless ``judge.allow_self_judging``: a judge favours its own answers. Generation's
        preflight check (``stages/generate.py``) asks it."""
        distinct = {self.model_identity(g) for g in self.generators}
        if len(distinct) < self.min_generators:
            raise ConfigError(
                file,
                "generators",
                f"{len(distinct)} distinct generator model(s) (endpoint+model), fewer than min_generators "
                f"{self.min_generators}: answers from many models are what make a benchmark; add generators "
                f"or set min_generators: {len(distinct)}",
            )
        if judging and not self.judge.allow_self_judging:
            judge = self.model_identity(self.judge)
            for i, g in enumerate(self.generators):
                if self.model_identity(g) == judge:
                    raise ConfigError(
                        file,
                        "judge.model",
                        f"the judge {self.judge.model!r} on endpoint {self.judge.endpoint!r} is also generators[{i}] "
                        f"({g.llm_name!r}) and would judge its own answers; use another judge or set "
                        f"judge.allow_self_judging: true",
                    )

    def relaxed_cast(self) -> list[str]:
        """The cast checks this config relaxed, in words (for the manifest and the dataset card)."""
        notes = []
        default = BuildConfig.model_fields["min_generators"].default
        if self.min_generators < default:
            notes.append(
                f"min_generators is {self.min_generators} (default {default}): the answers come from "
                f"{len({self.model_identity(g) for g in self.generators})} distinct model(s)"
            )
        if self.judge.allow_self_judging:
            judge = self.model_identity(self.judge)
            own = [g.llm_name for g in self.generators if self.model_identity(g) == judge]
            notes.append(
                "judge.allow_self_judging is true"
                + (f": the judge also wrote the answers of {', '.join(own)}" if own else "")
            )
        return notes

    @field_validator("license_name", "license_link")
    @classmethod
    def _other_license(cls, v: str | None, info: ValidationInfo) -> str | None:
        """Only beside a licence the Hub does not list (the card's ``other``), and in the Hub's form."""
        from rmb_build.release.card import LICENSE_LINK, LICENSE_NAME, hub_license_id

        if v is None:
            return v
        license_ = info.data.get("license")
        if not license_:
            raise ValueError("needs 'license' (the licence's terms in words)")
        if hub_license_id(license_):
            raise ValueError(f"only for a licence the Hub does not list ({license_!r} is a Hugging Face licence id)")
        if info.field_name == "license_name" and not LICENSE_NAME.fullmatch(v):
            raise ValueError(
                f"{v!r}: expected an id such as 'my-license-1.0' (lower-case letters, digits, '.', '_', '-')"
            )
        if info.field_name == "license_link" and not LICENSE_LINK.fullmatch(v):
            raise ValueError(f"{v!r}: expected a URL or a file of the dataset's repository (such as LICENSE.md)")
        return v

    @field_validator("scenarios")
    @classmethod
    def _scenarios(cls, v: list[str] | None) -> list[str] | None:
        from rmb_build.core.taxonomy import is_known

        for s in v or []:
            if not is_known(s):
                raise ValueError(
                    f"unknown scenario {s!r} (ids look like 'Helpfulness/Chat/Discussion' or 'Harmlessness/S6')"
                )
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return folder_name(v)

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: list[str]) -> list[str]:
        names = build_stages.listed()
        for s in v:
            if s not in names:
                raise ValueError(f"unknown stage {s!r} (stages: {', '.join(names)})")
        return v

    @model_validator(mode="after")
    def _one_encoder(self) -> "BuildConfig":
        """``dedup.model`` (deprecated) is read as ``embeddings.model`` when only it is set; both set must agree."""
        if "model" in self.dedup.model_fields_set:
            if "model" not in self.embeddings.model_fields_set:
                self.embeddings.model = self.dedup.model
            elif self.dedup.model != self.embeddings.model:
                raise ValueError(
                    f"dedup.model ({self.dedup.model!r}, deprecated) differs from embeddings.model "
                    f"({self.embeddings.model!r}): a build embeds with one encoder; set only embeddings.model"
                )
        self.dedup.model = self.embeddings.model
        return self

    @model_validator(mode="after")
    def _listed_stages_have_their_sections(self) -> "BuildConfig":
        """A ``stages:`` that names a stage whose config section is left out (``style`` without ``style:``) asks
        for what would never be made: refused, naming the section (a stage's optional section bears its name).
        The whole default list is no such request: it is what a config dumped and parsed again (``rmb build
        --name``, ``rmb judge-check``) holds."""
        if "stages" not in self.model_fields_set or self.stages == list(build_stages.listed()):
            return self
        for spec in build_stages.STAGES:
            if spec.name in self.stages and spec.config and spec.section(self) is None:
                raise ValueError(
                    f"stages lists {spec.name!r} but the config has no '{spec.name}:' section (the stage's settings)"
                )
        return self

    @model_validator(mode="after")
    def _release_answers_end_naturally(self) -> "BuildConfig":
        """A server reports ``finish_reason: stop`` for a stop string as for a natural end, so an answer a stop
        string cut would pass as finished: generators whose answers go into a release set no ``stop``."""
        if any(spec.name in self.stages for spec in build_stages.at(Position.RELEASE)):
            for i, g in enumerate(self.generators):
                if g.stop:
                    raise ValueError(
                        f"generators[{i}].stop: a generator whose answers go into a release may not set "
                        "'stop' (a cut answer would look finished); ask for short answers in its "
                        "system_prompt and give max_tokens room to finish them"
                    )
        return self

    @model_validator(mode="after")
    def _endpoints_exist(self) -> "BuildConfig":
        refs: list[tuple[str, str | None]] = [
            (f"generators[{i}].endpoint", g.endpoint) for i, g in enumerate(self.generators)
        ]
        refs += [("judge.endpoint", self.judge.endpoint), ("guard.endpoint", self.guard.endpoint)]
        if self.style is not None:
            refs.append(("style.endpoint", self.style.endpoint))
        if self.classifier.method == "llm":
            refs.append(("classifier.endpoint", self.classifier.endpoint))
        for where, name in refs:
            if name not in self.endpoints:
                raise ValueError(
                    f"{where}: endpoint {name!r} is not defined under 'endpoints' "
                    f"(defined: {', '.join(self.endpoints) or 'none'})"
                )
        return self


def _source_kind_tag(parts) -> tuple[list, type[BaseModel] | None]:
    """``parts`` without the tag the sources union adds (``sources[0].jsonl.split``), and that kind's
    options model."""
    parts = list(parts)
    if len(parts) > 2 and parts[0] == "sources" and isinstance(parts[1], int):
        from rmb_build.stages.sources import SOURCES

        if parts[2] in SOURCES:
            return parts[:2] + parts[3:], SOURCES.get(parts[2]).options
    return parts, None


def _loc(parts) -> str:
    parts, _ = _source_kind_tag(parts)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: tuple, root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    """The config model (below ``root``, default BuildConfig) that holds the keys at ``loc`` (a pydantic
    error location), if any."""
    rest, source_options = _source_kind_tag(loc)
    model: object  # a model class, or a type hint (list[...], dict[..., ...], X | None) on the way to one
    if source_options is not None:  # inside one source: its kind's options
        model, loc = source_options, tuple(rest[2:])
    else:
        model = root or BuildConfig
    for part in loc:
        if get_origin(model) in (list, dict):  # ``part`` is an index or a key: step into the element type
            model = get_args(model)[-1]
        elif isinstance(model, type) and issubclass(model, BaseModel) and part in model.model_fields:
            model = model.model_fields[part].annotation
        else:
            return None
        args = [a for a in get_args(model) if a is not type(None)]
        if get_origin(model) not in (list, dict) and len(args) == 1:  # X | None
            model = args[0]
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unknown_key(loc: tuple, root: type[BaseModel] | None = None) -> str:
    """ "unknown key 'x'", with the closest valid key at that level when one is close."""
    key, model = loc[-1], _model_at(loc[:-1], root)
    close = get_close_matches(str(key), list(model.model_fields), n=1) if model else []
    return f"unknown key {str(key)!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def validate_config(model: type[M], data: object, file: str = "<config>") -> M:
    """Validate a config mapping against ``model``; raises ConfigError naming the first bad field (unknown
    keys first: a misspelt key also makes its intended field look missing)."""
    if not isinstance(data, dict):
        raise ConfigError(file, None, f"expected a mapping at the top level, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(err.get("loc", ()))
        if err["type"] == "extra_forbidden":
            raise ConfigError(file, _loc(loc[:-1]) or None, _unknown_key(loc, model)) from None
        raise ConfigError(file, _loc(loc) or None, err["msg"].removeprefix("Value error, ")) from None


def parse_config(data: object, file: str = "<config>") -> BuildConfig:
    """Validate a build config mapping (see :func:`validate_config`)."""
    return validate_config(BuildConfig, data, file)


def load_config(path: str | os.PathLike) -> BuildConfig:
    """Read and validate a YAML build config."""
    return parse_config(read_yaml(path), str(path))
