"""Checks a build config must pass before any work starts (after pydantic's own validation).

Each failure is a ConfigError naming the config file and the field: a source that cannot be read,
an endpoint whose API-key variable is unset, more embedded servers than the machine runs side by side, a ``stages`` list the pipeline cannot run, a cast
whose judge is one of its generators or with fewer distinct generator models than ``min_generators``.
"""

from __future__ import annotations

import os

from rmb_build.core.errors import ConfigError, InputError
from rmb_build.core.machine import process_cap
from rmb_build.llm.config import ModelRef
from rmb_build.pipeline import stages as build_stages
from rmb_build.pipeline.config import BuildConfig
from rmb_build.stages import generate, judge
from rmb_build.stages.generate import check_generators
from rmb_build.stages.spec import Position, StageSpec

# Stages that may be left out of ``stages``: the pipeline passes their input through.


def check_sources(cfg: BuildConfig, file: str = "<config>") -> None:
    """Every source passes its kind's own check (a local file exists and is readable, ...)."""
    from rmb_build.stages.sources import SourceError, source_for
    from rmb_build.stages.sources.label_sets import load_label_set

    if not cfg.sources:
        raise ConfigError(file, "sources", "no sources: name at least one place to gather queries from")
    for i, src in enumerate(cfg.sources):
        try:
            source_for(src).check()
        except SourceError as exc:
            raise ConfigError(file, f"sources[{i}].path", str(exc)) from None
        if src.labels:
            try:
                load_label_set(src.labels)
            except InputError as exc:
                raise ConfigError(file, f"sources[{i}].labels", str(exc)) from None


def used_endpoints(cfg: BuildConfig) -> dict[str, str]:
    """Endpoint name -> the first field that uses it."""
    refs = [(f"generators[{i}].endpoint", g.endpoint) for i, g in enumerate(cfg.generators)]
    refs += [("judge.endpoint", cfg.judge.endpoint), ("guard.endpoint", cfg.guard.endpoint)]
    if cfg.classifier.method == "llm" and cfg.classifier.endpoint:
        refs.append(("classifier.endpoint", cfg.classifier.endpoint))
    out: dict[str, str] = {}
    for where, name in refs:
        out.setdefault(name, where)
    return out


def check_api_keys(cfg: BuildConfig, file: str = "<config>") -> None:
    """A used remote endpoint that names an ``api_key_env`` needs that variable set (its value is never read here)."""
    for name in used_endpoints(cfg):
        ep = cfg.endpoints[name]
        if ep.embedded is None and ep.api_key_env and not os.environ.get(ep.api_key_env):
            raise ConfigError(
                file,
                f"endpoints.{name}.api_key_env",
                f"environment variable {ep.api_key_env} is not set (endpoint {name!r} needs its API key)",
            )


def check_servers(cfg: BuildConfig, file: str = "<config>") -> None:
    """An embedded endpoint's ``servers:`` within this machine's cores and memory (each server holds its
    model's weights and a context)."""
    from rmb_build.llm.server import server_bytes

    for name, ep in cfg.endpoints.items():
        if ep.embedded and ep.servers > 1:
            why = process_cap("embedded servers", ep.servers, server_bytes(ep.embedded))
            if why:
                raise ConfigError(file, f"endpoints.{name}.servers", why)


def check_stages(cfg: BuildConfig, file: str = "<config>") -> list[str]:
    """The stages to run, in pipeline order: every stage up to the last one listed, minus skippable
    ones left out. A required stage missing before the last listed one is an error."""
    listed = set(cfg.stages)
    if not listed:
        raise ConfigError(file, "stages", "empty: list the stages to run")
    order = [s for s in build_stages.STAGES if s.listed]
    names = [s.name for s in order]
    last = max(names.index(s) for s in listed)
    skippable = [s.name for s in order if s.optional]
    run = []
    for spec in order[: last + 1]:
        if spec.name in listed and not spec.runnable:
            raise ConfigError(file, "stages", _no_way_to_run(spec))
        if spec.name in listed:
            run.append(spec.name)
        elif not spec.optional:
            raise ConfigError(
                file,
                "stages",
                f"{spec.name!r} is missing: it must run before {names[last]!r} "
                f"(only {' and '.join(skippable)} can be left out)",
            )
    return run


def _no_way_to_run(spec: StageSpec) -> str:
    """Why a listed stage cannot run: no position, or a position whose stages run only through their hook."""
    if spec.at is None:
        where = ", ".join(p.value for p in Position)
        return f"{spec.name!r} has no position to run at: its StageSpec sets no 'at' ({where})"
    return f"{spec.name!r} has no way to run at {spec.at.value}: its StageSpec sets no hook (on_run or on_batch)"


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
    default = BuildConfig.model_fields["min_generators"].default
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


def preflight(cfg: BuildConfig, file: str = "<config>") -> list[str]:
    """All checks that need no LLM call; returns the stages to run."""
    stages = check_stages(cfg, file)
    check_sources(cfg, file)
    check_api_keys(cfg, file)
    check_servers(cfg, file)
    if generate.SPEC.name in stages:
        try:
            check_generators(cfg.generators)
        except ConfigError as exc:  # the stage does not know the file's name
            prefix = f"{exc.file}: " + (f"field {exc.field!r}: " if exc.field else "")
            raise ConfigError(file, exc.field, str(exc).removeprefix(prefix)) from None
        check_cast(cfg, file, judging=judge.SPEC.name in stages)
    if cfg.run.task_runner == "dask":
        from importlib.util import find_spec

        if find_spec("prefect_dask") is None:
            raise ConfigError(
                file, "run.task_runner", "'dask' needs the prefect-dask package: pip install 'rmb_build[dask]'"
            )
    return stages
