"""The downstream check's config (YAML), in the build config's style: endpoints shared, unknown keys refused
in one line naming the file and the field (``rmb_build.pipeline.config.parse_config``'s rules).

    name: my-check
    endpoints: {local: {embedded: smollm2}}
    prompts:  {sources: [{kind: jsonl, path: prompts.jsonl}], max_prompts: 200, holdout: [data/release/demo]}
    policy:   {endpoint: local, model: smollm2, n: 16, temperature: 0.7}
    grader:   {kind: pointwise, endpoint: local, model: smollm2}
    reward_models: [baseline:length, baseline:random, {rm: "openai:smollm2@local", with_criteria: true}]
    benchmarks: [evals/length, evals/random, evals/smollm2]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, create_model, field_validator, model_validator

from rmb_build.core.options import StrictModel
from rmb_build.core.redact import redact
from rmb_build.evaluate.rm_options import config_fields
from rmb_build.llm.config import EndpointConfig, ModelRef
from rmb_build.stages.options import SourceConfig

DEFAULT_FIGURES = (
    "rmb_overall",
    "rmb_overall/pairwise/Helpfulness",
    "rmb_overall/pairwise/Harmlessness",
    "rmb_overall/bon/Helpfulness",
    "rmb_overall/bon/Harmlessness",
)


class HoldoutConfig(StrictModel):
    releases: list[str] | None = Field(
        default=None,
        description="benchmark releases the prompts must not come from (default: the releases the "
        "benchmarks' results.json name, found from their folders and confirmed by sha256; refused if missing)",
    )
    threshold: float = Field(default=0.9, gt=0, le=1, description="cosine at or above which a prompt is dropped")
    model: str = Field(default="all-MiniLM-L6-v2", description="the sentence encoder (the contamination check's)")


class PromptsConfig(StrictModel):
    sources: list[SourceConfig] = Field(min_length=1, description="any query source the build reads")
    max_prompts: int | None = Field(default=None, ge=1, description="draw this many prompts (seeded), after holdout")
    seed: int = 0
    default_scenario: str | None = Field(
        default=None,
        description="the scenario (criteria) of prompts whose source gives none, e.g. Helpfulness/Chat/Discussion",
    )
    holdout: HoldoutConfig = Field(default_factory=HoldoutConfig)

    @field_validator("default_scenario")
    @classmethod
    def _scenario(cls, v: str | None) -> str | None:
        from rmb_build.core.taxonomy import is_known

        if v is not None and not is_known(v):
            raise ValueError(f"unknown scenario {v!r} (ids look like 'Helpfulness/Chat/Discussion')")
        return v


class PolicyConfig(ModelRef):
    n: int = Field(default=16, ge=2, le=256, description="samples per prompt")
    temperature: float = Field(default=0.7, ge=0, le=2, description="above 0: the n samples must differ")
    system_prompt: str | None = None

    @field_validator("temperature")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be above 0 (at 0 the n samples would all be the same answer)")
        return v


class GraderConfig(StrictModel):
    kind: Literal["pointwise", "reference", "python"] = "pointwise"
    endpoint: str | None = None
    model: str | None = None
    function: str | None = Field(
        default=None, description="python: <module or file.py>:<function>(conversation, answer)"
    )
    samples: int = Field(default=1, ge=1, description="pointwise: judgements per sample, averaged")
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=256, ge=1)
    max_reasks: int = Field(default=2, ge=0)
    rationale_chars: int = Field(default=200, ge=20, le=2000)
    reference: ModelRef | None = Field(
        default=None, description="reference: the model whose answer (temperature 0) each sample is judged against"
    )

    @model_validator(mode="after")
    def _kind_fields(self) -> "GraderConfig":
        if self.kind == "python":
            if not self.function:
                raise ValueError("a python grader needs 'function' (<module or file.py>:<function>)")
        else:
            if not self.endpoint or not self.model:
                raise ValueError(f"a {self.kind} grader needs 'endpoint' and 'model'")
            if self.kind == "reference" and self.reference is None:
                raise ValueError("a reference grader needs 'reference' (endpoint and model of the reference answers)")
        return self


class _RewardModel(StrictModel):
    """One ``rmb evaluate --rm`` spec with the options ``rmb evaluate`` takes for it: every per-RM option of
    ``rmb_build.evaluate.rm_options`` is a key (its own type, default, check and help)."""

    rm: str
    name: str | None = Field(default=None, description="its key in downstream.json (default: the spec)")

    @field_validator("judge_mode", check_fields=False)
    @classmethod
    def _scores_each_answer(cls, v: str) -> str:
        if v != "pointwise":
            raise ValueError(f"{v!r}: a best-of-n pick needs a score per answer; use pointwise")
        return v

    @property
    def key(self) -> str:
        """Its key in downstream.json: the name, else the redacted spec (two specs that differ only in a
        credential are one key, refused as a duplicate)."""
        return self.name or redact(self.rm)

    def options(self) -> dict[str, Any]:
        """The RMOptions keywords this entry sets (every per-RM option, defaults included)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k not in ("rm", "name")}


# A best-of-n pick scores each answer: an openai: RM rates them (pointwise), unlike rmb evaluate's default.
RewardModelConfig = create_model(
    "RewardModelConfig", __base__=_RewardModel, __module__=__name__, **config_fields(judge_mode="pointwise")
)


class BootstrapConfig(StrictModel):
    resamples: int = Field(default=2000, ge=100)
    seed: int = 0


class DownstreamConfig(StrictModel):
    name: str
    endpoints: dict[str, EndpointConfig]
    prompts: PromptsConfig
    policy: PolicyConfig
    grader: GraderConfig
    reward_models: list[RewardModelConfig] = Field(min_length=1)
    benchmarks: list[str] = Field(default_factory=list, description="'rmb evaluate --out' folders")
    figures: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FIGURES),
        description="benchmark figures to correlate: rmb_overall, rmb_overall/<set>/<goal>, or a "
        "dotted path to any number in results.json (pairwise.overall.micro)",
    )
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    max_cost: float | None = Field(default=None, ge=0)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        from rmb_build.pipeline.config import folder_name

        return folder_name(v)

    @field_validator("reward_models", mode="before")
    @classmethod
    def _specs(cls, v: object) -> object:
        return [{"rm": x} if isinstance(x, str) else x for x in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _consistent(self) -> "DownstreamConfig":
        refs = [("policy.endpoint", self.policy.endpoint)]
        if self.grader.endpoint:
            refs.append(("grader.endpoint", self.grader.endpoint))
        if self.grader.reference:
            refs.append(("grader.reference.endpoint", self.grader.reference.endpoint))
        for where, name in refs:
            if name not in self.endpoints:
                raise ValueError(
                    f"{where}: endpoint {name!r} is not defined under 'endpoints' "
                    f"(defined: {', '.join(self.endpoints) or 'none'})"
                )
        seen: dict[str, int] = {}
        for i, r in enumerate(self.reward_models):
            if r.key in seen:
                raise ValueError(
                    f"reward_models[{i}]: {r.key!r} is already reward_models[{seen[r.key]}]; give one a 'name'"
                )
            seen[r.key] = i
        return self


def parse_downstream_config(data: object, file: str = "<config>") -> DownstreamConfig:
    """Validate a config mapping; ConfigError naming the first bad field (an unknown key first)."""
    from rmb_build.pipeline.config import validate_config

    return validate_config(DownstreamConfig, data, file)


def load_downstream_config(path: str | Path) -> DownstreamConfig:
    from rmb_build.core.yaml_file import read_yaml

    return parse_downstream_config(read_yaml(path), str(path))
