"""``rmb judge-check``: the build's judge (and guard) against a labelled release's pairwise items.

The same check ``rmb build`` runs before generating with ``judge.gold`` (``rmb_build.stages.gold``),
alone; its calls land in the build's LLM cache, so a later build repeats none of them.
"""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="build config (YAML); default: the embedded demo")
    p.add_argument(
        "--gold",
        default=None,
        help="labelled release: RMB folder, local Hugging Face folder or Hub id "
        "(default: the config's judge.gold.release)",
    )
    p.add_argument(
        "--items", type=int, default=None, help="pairwise items to sample (default: judge.gold.items or 200)"
    )
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: judge.gold.seed or 0)")
    p.add_argument("--workdir", default=None, help="folder holding runs/ (the LLM cache is the build's)")
    p.add_argument("--json", default=None, metavar="OUT", help="also write the result (the manifest's gold section)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rmb_build.commands.build import load_build_config
    from rmb_build.core import atomic
    from rmb_build.core.errors import RMBError
    from rmb_build.core.paths import run_dir
    from rmb_build.llm import LLMClient
    from rmb_build.pipeline.config import parse_config
    from rmb_build.pipeline.preflight import preflight
    from rmb_build.release.gold_report import table, verdict_on_chance
    from rmb_build.stages.gold import gold_check
    from rmb_build.stages.options import GoldConfig

    cfg, label = load_build_config(args.config)
    preflight(cfg, label)
    base = cfg.judge.gold
    release = args.gold or (base.release if base else None)
    if not release:
        raise RMBError(f"{label}: no gold release (give --gold RELEASE or judge.gold.release in the config)")
    gold = GoldConfig(
        release=release,
        items=args.items or (base.items if base else 200),
        seed=args.seed if args.seed is not None else (base.seed if base else 0),
        required=True,
    )
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["judge"]["gold"] = gold.model_dump(mode="json")
    cfg = parse_config(data, label)

    async def check() -> dict:
        async with LLMClient(cfg.endpoints, cache_dir=run_dir(cfg.name, args.workdir) / "llm_cache") as client:
            return (await gold_check(cfg, client))[0]

    section = asyncio.run(check())
    print(
        f"judge {cfg.judge.endpoint}/{cfg.judge.model} (samples {cfg.judge.samples}) against {release}: "
        f"{section['items']} pairs (ties count half; chance 0.5)"
    )
    print(table(section))
    print(verdict_on_chance(section))
    if args.json:
        atomic.write_json(args.json, section)
    return 0
