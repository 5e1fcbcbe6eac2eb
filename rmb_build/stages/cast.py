"""The cast: which models answer (the generators) and which judges them. Generation's preflight check
(``generate.SPEC.check``) refuses a judge that is one of its generators, or fewer distinct generator models than
``min_generators``, unless the config relaxes it; the manifest's ``cast`` says which checks it relaxed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.core.errors import ConfigError
from rmb_build.llm.config import ModelRef

if TYPE_CHECKING:  # the build config is the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig


def model_identity(cfg: BuildConfig, ref: ModelRef) -> tuple[str, str]:
    """What makes two references the same model: the server behind the endpoint (its embedded model
    or its URL, so two endpoint names for one server are one) and the model name."""
    ep = cfg.endpoints[ref.endpoint]
    server = f"embedded:{ep.embedded}" if ep.embedded else (ep.base_url or "").rstrip("/")
    return server, ref.model


def check_cast(cfg: BuildConfig, file: str = "<config>", *, judging: bool = True) -> None:
    """At least ``min_generators`` distinct generator models, and (when ``judging``) a judge that is
    none of them unless ``judge.allow_self_judging``: a judge favours its own answers."""
    distinct = {model_identity(cfg, g) for g in cfg.generators}
    if len(distinct) < cfg.min_generators:
        raise ConfigError(
            file,
            "generators",
            f"{len(distinct)} distinct generator model(s) (endpoint+model), fewer than min_generators "
            f"{cfg.min_generators}: answers from many models are what make a benchmark; add generators "
            f"or set min_generators: {len(distinct)}",
        )
    if judging and not cfg.judge.allow_self_judging:
        judge = model_identity(cfg, cfg.judge)
        for i, g in enumerate(cfg.generators):
            if model_identity(cfg, g) == judge:
                raise ConfigError(
                    file,
                    "judge.model",
                    f"the judge {cfg.judge.model!r} on endpoint {cfg.judge.endpoint!r} is also generators[{i}] "
                    f"({g.llm_name!r}) and would judge its own answers; use another judge or set "
                    f"judge.allow_self_judging: true",
                )


def relaxed_cast(cfg: BuildConfig) -> list[str]:
    """The cast checks a config relaxed, in words (for the manifest and the dataset card)."""
    notes = []
    default = type(cfg).model_fields["min_generators"].default
    if cfg.min_generators < default:
        notes.append(
            f"min_generators is {cfg.min_generators} (default {default}): the answers come from "
            f"{len({model_identity(cfg, g) for g in cfg.generators})} distinct model(s)"
        )
    if cfg.judge.allow_self_judging:
        judge = model_identity(cfg, cfg.judge)
        own = [g.llm_name for g in cfg.generators if model_identity(cfg, g) == judge]
        notes.append(
            "judge.allow_self_judging is true"
            + (f": the judge also wrote the answers of {', '.join(own)}" if own else "")
        )
    return notes
