"""The build config (YAML): endpoints, generators, judge, guard, sources and stage settings.

Validated with pydantic before anything runs; a wrong type, an unknown key or a missing endpoint
fails with a ConfigError that names the file and the field. The keys ``name, endpoints, generators,
judge, guard`` are a fixed contract: other tools read them.
"""

from __future__ import annotations

import os
import re
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlparse

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rmb_build.core.errors import ConfigError
from rmb_build.embed.similarity import BLOCK_SIZE

STAGES = ("gather", "dedup", "classify", "generate", "judge", "guard", "build_sets", "release")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Price(_Strict):
    input: float = Field(ge=0, description="USD per million input tokens")
    output: float = Field(ge=0, description="USD per million output tokens")


class EndpointConfig(_Strict):
    """An OpenAI-compatible endpoint, or the embedded local server (``embedded: smollm2``)."""

    embedded: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    structured_output: Literal["json_schema", "json_object", "none"] | None = None
    max_concurrency: int | None = Field(default=None, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=8, ge=0)
    outage_limit_s: float = Field(default=600.0, ge=0, description="keep retrying an unreachable endpoint this long")
    price_per_mtok: Price | None = None
    n_ctx: int = Field(default=4096, ge=256, description="context size of an embedded server")

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parsed = urlparse(v)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v.rstrip("/")

    @field_validator("embedded")
    @classmethod
    def _embedded(cls, v: str | None) -> str | None:
        from rmb_build.llm.embedded_models import EMBEDDED

        if v is not None and v not in EMBEDDED:
            raise ValueError(f"unknown embedded model {v!r} (known: {', '.join(EMBEDDED)})")
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> "EndpointConfig":
        if (self.embedded is None) == (self.base_url is None):
            raise ValueError("give exactly one of 'embedded' or 'base_url'")
        if self.embedded is not None:
            # llama_cpp.server runs one request at a time and answers HTTP 500 to json_schema.
            self.max_concurrency = 1
            self.structured_output = self.structured_output or "json_object"
        else:
            self.max_concurrency = self.max_concurrency or 8
            self.structured_output = self.structured_output or "json_schema"
        return self

    def api_key(self) -> str | None:
        """The key from the environment (never stored); None for endpoints that need none."""
        if self.embedded is not None:
            return None
        return os.environ.get(self.api_key_env or "OPENAI_API_KEY")


class ModelRef(_Strict):
    endpoint: str
    model: str
    temperature: float = Field(default=0.0, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int = Field(default=512, ge=1)


class GeneratorConfig(ModelRef):
    name: str | None = None  # llm_name written to the release; defaults to the model
    temperature: float = Field(default=0.7, ge=0, le=2)
    system_prompt: str | None = None
    seed: int | None = None
    stop: list[str] = Field(
        default_factory=list,
        description="stop sequences, for builds that write no release: a "
        "release's generators set none (see BuildConfig)",
    )

    @property
    def llm_name(self) -> str:
        return self.name or self.model


class GoldConfig(_Strict):
    """A labelled release the judge is checked against before generation (``rmb_build.stages.gold``)."""

    release: str = Field(description="an RMB release folder, a local Hugging Face folder or a Hub id")
    items: int = Field(default=200, ge=2, description="pairwise items sampled, balanced across goals")
    seed: int = 0
    max_chars: int | None = Field(
        default=None,
        ge=1,
        description="sample only pairs whose conversation and answers "
        "total at most this many characters (small local judges)",
    )
    required: bool = Field(default=True, description="false: a missing release is logged and recorded, not an error")


class JudgeConfig(ModelRef):
    samples: int = Field(default=3, ge=1)
    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=256, ge=1)
    max_reasks: int = Field(default=2, ge=0)
    rationale_chars: int = Field(
        default=200,
        ge=20,
        le=2000,
        description="longest rationale the reply schema allows (each token costs on small local judges)",
    )
    gold: GoldConfig | None = None
    allow_self_judging: bool = Field(
        default=False,
        description="let the judge be one of the generators (same endpoint and model): it then favours its own answers",
    )


class GuardConfig(ModelRef):
    max_tokens: int = Field(default=16, ge=1)
    # "prompt": Llama Guard 2's prompt rendered into one user message (any chat model, the demo);
    # "chat": the conversation as messages, for servers whose chat template is Llama Guard's own.
    prompt_format: Literal["prompt", "chat"] = "prompt"


class RouteConfig(_Strict):
    """Goal routing by the guard's prompt verdicts (``rmb_build.stages.route``)."""

    enabled: bool = True
    # "selected": guard the selected queries, route them, then top up from the rest of the pool (cheap:
    # one guard call per selected query and per top-up); "pool": guard every classified query before selection.
    scope: Literal["selected", "pool"] = "selected"
    safe_harmful: Literal["helpfulness", "drop"] = Field(
        default="helpfulness",
        description="a 'safe' verdict on a prompt classified harmful: its most likely helpfulness scenario, or dropped",
    )
    top_up_rounds: int = Field(default=2, ge=0, description="rounds of drawing replacements for routed-away queries")
    min_guard_precision: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="an 'unsafe' prompt verdict makes a query harmlessness only where the "
        "guard's prompt-level precision, measured on judge.gold's prompts, reaches this",
    )


class ClassifierConfig(_Strict):
    method: Literal["embedding", "llm"] = "embedding"
    endpoint: str | None = None
    model: str | None = None
    train_release: str | None = Field(default=None, description="a labelled release to train the embedding classifier")
    min_confidence: float = Field(default=0.0, ge=0, le=1)


def _source_union() -> Any:
    from rmb_build.stages.sources import option_classes

    return Annotated[Union[option_classes()], Field(discriminator="kind")]


# Where queries come from: one options class per registered source kind (rmb_build/stages/sources/),
# told apart by ``kind``.
SourceConfig = _source_union()


def source_config(**fields: Any) -> Any:
    """One source's options, validated (the class follows ``kind``)."""
    return TypeAdapter(SourceConfig).validate_python(fields)


class DedupConfig(_Strict):
    threshold: float = Field(default=0.9, gt=0, le=1)
    model: str = Field(
        default="all-MiniLM-L6-v2",
        description="deprecated: set embeddings.model (a build copies embeddings.model here)",
    )
    block_size: int = Field(default=BLOCK_SIZE, ge=64, description="rows per side of a similarity tile")


class EmbeddingsConfig(_Strict):
    """The build's one sentence encoder: dedup, the embedding classifier and the release audit embed with it,
    through one store in the run folder (``rmb_build.embed.store``): each distinct text once."""

    model: str = Field(
        default="all-MiniLM-L6-v2", description="the packaged all-MiniLM-L6-v2, a local folder or a Hub id"
    )
    backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="torch", description="onnx/onnx-int8: the same model run by ONNX Runtime (the 'onnx' extra)"
    )
    dtype: Literal["float32", "float16"] = Field(default="float32", description="how vectors are stored on disk")


class SetsConfig(_Strict):
    margin: float = Field(default=1.0, ge=0)
    max_losers: int = Field(default=6, ge=2, le=6)
    min_losers: int = Field(default=2, ge=1)
    max_pairs_per_query: int = Field(default=10, ge=1, description="as RMB: up to 10 pairs per query")
    pair_policy: Literal["stratified", "largest_gap"] = Field(
        default="stratified",
        description="stratified: drawn across the candidates' score-gap quantiles (RMB-like); "
        "largest_gap: the easiest pairs first",
    )
    unreadable_verdicts: Literal["exclude", "judge_only"] = Field(
        default="exclude",
        description="harmlessness answers without a readable guard verdict: exclude (compared "
        "with nothing), or judge_only (compared only with each other, by score)",
    )
    seed: int = 0

    @model_validator(mode="after")
    def _losers(self) -> "SetsConfig":
        if self.min_losers > self.max_losers:
            raise ValueError(f"min_losers ({self.min_losers}) is above max_losers ({self.max_losers})")
        return self


class SelectConfig(_Strict):
    """Which classified queries go on to generation: a subset balanced over goals and scenarios."""

    total: int | None = Field(default=None, ge=1, description="queries to keep (none: all)")
    min_per_goal: int = Field(default=0, ge=0, description="at least this many per goal where there are as many")
    per_scenario: int | None = Field(default=None, ge=1, description="at most this many per scenario")
    seed: int = 0


class RunConfig(_Strict):
    task_runner: Literal["thread", "dask"] = "thread"
    dask_address: str | None = None
    batch_size: int = Field(default=200, ge=1)
    max_cost: float | None = Field(default=None, ge=0)
    max_queries: int | None = Field(default=None, ge=1)


class BuildConfig(_Strict):
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
    run: RunConfig = Field(default_factory=RunConfig)
    stages: list[str] = Field(default_factory=lambda: list(STAGES))
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
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", v):
            raise ValueError(f"{v!r}: use letters, digits, '.', '_' and '-' (it names folders)")
        return v

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: list[str]) -> list[str]:
        for s in v:
            if s not in STAGES:
                raise ValueError(f"unknown stage {s!r} (stages: {', '.join(STAGES)})")
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
    def _release_answers_end_naturally(self) -> "BuildConfig":
        """A server reports ``finish_reason: stop`` for a stop string as for a natural end, so an answer a stop
        string cut would pass as finished: generators whose answers go into a release set no ``stop``."""
        if "release" in self.stages:
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
            return parts[:2] + parts[3:], SOURCES[parts[2]].options
    return parts, None


def _loc(parts) -> str:
    parts, _ = _source_kind_tag(parts)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The config model that holds the keys at ``loc`` (a pydantic error location), if any."""
    rest, source_options = _source_kind_tag(loc)
    if source_options is not None:  # inside one source: its kind's options
        model, loc = source_options, tuple(rest[2:])
    else:
        model = BuildConfig
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


def _unknown_key(loc: tuple) -> str:
    """ "unknown key 'x'", with the closest valid key at that level when one is close."""
    key, model = loc[-1], _model_at(loc[:-1])
    close = get_close_matches(str(key), list(model.model_fields), n=1) if model else []
    return f"unknown key {str(key)!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def parse_config(data: Any, file: str = "<config>") -> BuildConfig:
    """Validate a config mapping; raises ConfigError naming the first bad field (unknown keys first:
    a misspelt key also makes its intended field look missing)."""
    if not isinstance(data, dict):
        raise ConfigError(file, None, f"expected a mapping at the top level, got {type(data).__name__}")
    try:
        return BuildConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(err.get("loc", ()))
        if err["type"] == "extra_forbidden":
            raise ConfigError(file, _loc(loc[:-1]) or None, _unknown_key(loc)) from None
        raise ConfigError(file, _loc(loc) or None, err["msg"].removeprefix("Value error, ")) from None


def load_config(path: str | os.PathLike) -> BuildConfig:
    """Read and validate a YAML build config."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), None, "no such file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), None, f"invalid UTF-8 at byte {exc.start}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(str(path), None, f"invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse_config(data, str(path))
