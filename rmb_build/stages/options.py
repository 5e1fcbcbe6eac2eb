"""Each stage's options, as the build config holds them (``rmb_build.pipeline.config.BuildConfig``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, model_validator

from rmb_build.core.options import StrictModel
from rmb_build.embed.similarity import BLOCK_SIZE
from rmb_build.llm.config import ModelRef
from rmb_build.stages.sources.options import SourceOptions


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


class GoldConfig(StrictModel):
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
    reply: Literal["auto", "text", "json"] = Field(
        default="auto",
        description="the verdict's form: 'text' is Llama Guard's own (safe / unsafe, then categories); 'json' "
        "constrains the reply to {verdict, categories} with the endpoint's structured output (at least "
        "40 max_tokens are asked); 'auto': json on an embedded endpoint (a small chat model, no Llama Guard), "
        "text elsewhere",
    )


class RouteConfig(StrictModel):
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


class ClassifierConfig(StrictModel):
    method: Literal["embedding", "llm"] = "embedding"
    endpoint: str | None = None
    model: str | None = None
    train_release: str | None = Field(default=None, description="a labelled release to train the embedding classifier")
    min_confidence: float = Field(default=0.0, ge=0, le=1)
    harm_from_classifier: bool = Field(
        default=True,
        description="a harmlessness call of the classifier at the measured P(harm) threshold is evidence;"
        " false: only label sets (and the guard, where measured) put queries in harmlessness",
    )


def _source_union() -> Any:
    from rmb_build.stages.sources import option_classes

    return Annotated[Union[option_classes()], Field(discriminator="kind")]


# Where queries come from: one options class per registered source kind (rmb_build/stages/sources/),
# told apart by ``kind``.
SourceConfig = _source_union()


def source_config(**fields: object) -> SourceOptions:
    """One source's options, validated (the class follows ``kind``)."""
    return TypeAdapter(SourceConfig).validate_python(fields)


class DedupConfig(StrictModel):
    threshold: float = Field(default=0.9, gt=0, le=1)
    model: str = Field(
        default="all-MiniLM-L6-v2",
        description="deprecated: set embeddings.model (a build copies embeddings.model here)",
    )
    block_size: int = Field(default=BLOCK_SIZE, ge=64, description="rows per side of a similarity tile")


class EmbeddingsConfig(StrictModel):
    """The build's one sentence encoder: dedup, the embedding classifier and the release audit embed with it,
    through one store in the run folder (``rmb_build.embed.store``): each distinct text once."""

    model: str = Field(
        default="all-MiniLM-L6-v2", description="the packaged all-MiniLM-L6-v2, a local folder or a Hub id"
    )
    backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="torch", description="onnx/onnx-int8: the same model run by ONNX Runtime (the 'onnx' extra)"
    )
    dtype: Literal["float32", "float16"] = Field(default="float32", description="how vectors are stored on disk")


class SetsConfig(StrictModel):
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


class SelectConfig(StrictModel):
    """Which classified queries go on to generation: a subset balanced over goals and scenarios."""

    total: int | None = Field(default=None, ge=1, description="queries to keep (none: all)")
    min_per_goal: int = Field(default=0, ge=0, description="at least this many per goal where there are as many")
    per_scenario: int | None = Field(default=None, ge=1, description="at most this many per scenario")
    seed: int = 0


class StyleConfig(ModelRef):
    """The style-variant stage (``rmb_build.stages.style``): the endpoint and model that rewrite each pairwise
    item's answers into RM-Bench's three styles; the build's judge checks each rewrite."""

    max_tokens: int = Field(default=1024, ge=1)
    max_score_shift: float = Field(
        default=2.0, ge=0, description="a rewrite whose judge score moves more than this from its original is dropped"
    )
    bon: bool = Field(
        default=False,
        description="also rewrite each Best-of-N item's winner and its last (lowest-scored) loser into the three styles",
    )
