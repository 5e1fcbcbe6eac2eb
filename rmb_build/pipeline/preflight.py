"""Checks a build config must pass before any work starts (after pydantic's own validation).

Each failure is a ConfigError naming the config file and the field: a source that cannot be read,
an endpoint whose API-key variable is unset, more embedded servers than the machine runs side by side, a
``stages`` list the pipeline cannot run; then each stage to run's own check (``StageSpec.check``: generation's
asks the config's ``check_cast``).
"""

from __future__ import annotations

import os

from rmb_build.core.errors import ConfigError, InputError
from rmb_build.core.machine import process_cap
from rmb_build.pipeline import stages as build_stages
from rmb_build.pipeline.config import BuildConfig
from rmb_build.stages.spec import Position, StageSpec


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


def used_endpoints(cfg: BuildConfig) -> list[str]:
    """The endpoints the config's stage sections name (each stage's spec says which: ``StageSpec.endpoints``)."""
    names: dict[str, None] = {}
    for spec in build_stages.STAGES:
        section = spec.section(cfg)
        if spec.endpoints is not None and section is not None:
            names.update(dict.fromkeys(spec.endpoints(section) or ()))
    return list(names)


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


def preflight(cfg: BuildConfig, file: str = "<config>") -> list[str]:
    """All checks that need no LLM call; returns the stages to run."""
    stages = check_stages(cfg, file)
    check_sources(cfg, file)
    check_api_keys(cfg, file)
    check_servers(cfg, file)
    for spec in build_stages.STAGES:
        if spec.check is not None and (spec.runs_with or spec.stage) in stages:
            try:
                spec.check(cfg, stages)
            except ConfigError as exc:  # the stage's check does not know the file's name
                raise ConfigError(file, exc.field, exc.message) from None
    if cfg.run.task_runner == "dask":
        from importlib.util import find_spec

        from rmb_build.pipeline.prefect_task_runner import DASK_MISSING

        if find_spec("prefect_dask") is None:
            raise ConfigError(file, "run.task_runner", DASK_MISSING)
    return stages
