"""Score any reward model against an RMB release: per scenario, task and goal, for both sets.

    from rmb_build.evaluate import RMOptions, evaluate, load_rm
    results = evaluate(open_release("data/release/demo"), load_rm("baseline:length", RMOptions()),
                       out_dir="runs/eval/length", cache_dir=default_cache_dir())  # evaluate.cache

Imports are lazy so that ``import rmb_build.evaluate`` stays cheap.
"""

from __future__ import annotations

__all__ = ["RMOptions", "load_rm", "evaluate"]  # compare: rmb_build.evaluate.compare.compare


def __getattr__(name: str):
    if name in ("RMOptions", "load_rm"):
        from rmb_build.evaluate import adapters

        return getattr(adapters, name)
    if name == "evaluate":
        from rmb_build.evaluate.run import evaluate

        return evaluate
    raise AttributeError(name)
