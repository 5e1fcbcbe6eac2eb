"""The embedded demo's benchmark, so that ``rmb downstream`` with no config has figures to correlate.

A small release made deterministically from the ShareGPT copy the demo's prompts come from: the first
``DEMO_ITEMS`` single-turn English conversations with a short answer. Each is one pairwise item (the
ShareGPT answer against another prompt's answer, or against itself cut to a third, alternately) and one
Best-of-N item (the answer against both). Every reward model of the demo is scored on it with
``rmb evaluate``'s own ``evaluate`` (its score and LLM caches, results.json written whole or not at all),
and those folders become the check's ``benchmarks``. The release's prompts are then held out of the
check's prompts like any benchmark's (``load_prompts``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from rmb_build.analysis.downstream.config import DownstreamConfig
from rmb_build.core.atomic import atomic_dir
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.core.paths import safe_name
from rmb_build.release.read import Release

DEMO_CONFIG = "demo.yaml"  # shipped beside this module
DEMO_ITEMS = 12
SCENARIO = "Helpfulness/Chat/Discussion"
PROMPT_CHARS, ANSWER_CHARS = (15, 300), (80, 600)
RELEASE_ENTRIES = {"Pairwise_set", "BoN_set"}


def demo_config() -> DownstreamConfig:
    """The embedded demo's config (``demo.yaml``)."""
    from importlib import resources

    from rmb_build.analysis.downstream.config import load_downstream_config

    with resources.as_file(resources.files(__package__) / DEMO_CONFIG) as path:
        return load_downstream_config(path)


def _exchanges(records: Iterator[tuple[int, Any]], n: int) -> list[tuple[str, str, str]]:
    """(record id, prompt, answer) of the first ``n`` single-turn ASCII exchanges of the allowed lengths."""
    out = []
    for _, rec in records:
        turns = rec.get("conversations") if isinstance(rec, dict) else None
        if not isinstance(turns, list) or len(turns) != 2 or not all(isinstance(t, dict) for t in turns):
            continue
        (asker, prompt), (answerer, answer) = ((t.get("from"), t.get("value")) for t in turns)
        if asker != "human" or answerer != "gpt" or not isinstance(prompt, str) or not isinstance(answer, str):
            continue
        prompt, answer = prompt.strip(), answer.strip()
        if (
            PROMPT_CHARS[0] <= len(prompt) <= PROMPT_CHARS[1]
            and ANSWER_CHARS[0] <= len(answer) <= ANSWER_CHARS[1]
            and (prompt + answer).isascii()
        ):
            out.append((str(rec.get("id", len(out))), prompt, answer))
            if len(out) == n:
                break
    return out


def _cut(text: str) -> str:
    words = text.split()
    return " ".join(words[: max(3, len(words) // 3)])


def demo_release(records: Iterator[tuple[int, Any]], n: int | None = None) -> Release:
    """The demo's benchmark of ``n`` (default ``DEMO_ITEMS``) prompts from ShareGPT ``records`` (``(index,
    record)``, as ``iter_json_array`` yields)."""
    rows = _exchanges(records, DEMO_ITEMS if n is None else n)
    if len(rows) < 3:
        from rmb_build.core.errors import RMBError

        raise RMBError(f"the demo's benchmark: the ShareGPT copy has only {len(rows)} usable exchanges, needs 3")
    release = Release(name="downstream-demo-benchmark", root=None)
    for k, (_, prompt, answer) in enumerate(rows):
        conversation = (Turn("user", prompt, "English"),)
        best = Answer("sharegpt", answer)
        other = Answer("another-prompt", rows[(k + 1) % len(rows)][2])
        cut = Answer("cut-to-a-third", _cut(answer))
        release.add(
            PairwiseItem(
                str(k), conversation, best, other if k % 2 == 0 else cut, SCENARIO, f"Pairwise_set/{SCENARIO}"
            )  # fmt: skip
        )
        release.add(BonItem(str(k), conversation, best, (other, cut), SCENARIO, f"BoN_set/{SCENARIO}"))
    return release


def write_demo_release(folder: Path) -> Path:
    """The demo's benchmark written (whole or not at all) into ``folder``, from the packaged ShareGPT."""
    from rmb_build.core.json_array import iter_json_array
    from rmb_build.release.write import write_release
    from rmb_build.stages.sources.sharegpt import packaged_sharegpt

    with packaged_sharegpt() as path:
        release = demo_release(iter_json_array(path))
    with atomic_dir(folder, RELEASE_ENTRIES, RELEASE_ENTRIES, flag="the demo's benchmark release") as tmp:
        write_release(release, tmp)
    return folder


def evaluate_demo_benchmarks(
    cfg: DownstreamConfig,
    run_dir: str | Path,
    score_dir: str | Path,
    entries: Collection[str],
    marks: Collection[str],
    *,
    dry_run: bool = False,
    progress: bool = False,
    log: Callable[[str], Any] = print,
) -> DownstreamConfig:
    """Every RM of ``cfg`` evaluated on the demo's benchmark (``<run_dir>/benchmark/``), each into its own
    ``rmb evaluate --out`` folder (``entries``/``marks``: what such a folder holds); ``cfg`` with those
    folders as its ``benchmarks``. ``dry_run``: the release only, nothing evaluated."""
    from rmb_build.analysis.downstream.run import load_reward_model
    from rmb_build.benchmarks.formats import RMB, open_release
    from rmb_build.evaluate.run import evaluate

    run_dir = Path(run_dir)
    root = run_dir / "benchmark"
    release_dir = write_demo_release(root / "release")
    release = open_release(str(release_dir), RMB)
    if dry_run:
        _plan_benchmarks(cfg, release, run_dir, score_dir, log)
        return with_benchmarks(cfg, [], release_dir)
    folders = []
    for r in cfg.reward_models:
        rm = load_reward_model(r, cfg, run_dir / "llm_cache")
        out = root / safe_name(r.key)
        with atomic_dir(out, entries, marks, flag="the demo's benchmark folder") as tmp:
            results = evaluate(
                release,
                rm,
                tmp,
                score_dir,
                resamples=cfg.bootstrap.resamples,
                seed=cfg.bootstrap.seed,
                release_label=str(release_dir),
                progress=progress,
            )
        s, mean = results["scoring"], results["rmb_overall"]["mean"]
        log(
            f"benchmark {r.key}: RMB overall {'none' if mean is None else f'{mean:.3f}'} on {len(release.pairwise)} "
            f"pairs and {len(release.bon)} best-of-3 items ({s['scored']} texts scored, {s['cached']} cached)"
        )
        folders.append(str(out))
    return with_benchmarks(cfg, folders, release_dir)


def _plan_benchmarks(cfg: DownstreamConfig, release: Release, run_dir: Path, score_dir, log) -> None:
    """What evaluating the RMs on the demo's benchmark would score and send (``plan_scoring``, as the check's
    own dry run counts its RMs)."""
    from rmb_build.analysis.downstream.run import load_reward_model, plan_scoring, planning_client
    from rmb_build.evaluate.cache import ScoreCache

    items = list(release.items())
    with planning_client(cfg.endpoints, run_dir / "llm_cache") as planner, ScoreCache(score_dir) as cache:
        for r in cfg.reward_models:
            rm = load_reward_model(r, cfg, run_dir / "llm_cache")
            try:
                t = plan_scoring(rm, items, cache, planner)
            finally:
                rm.close()
            log(f"dry run: benchmark {r.key}: {t['to_score']} texts to score ({t['cached']} cached)")
        est = planner.report()
    log(
        f"dry run: the demo's benchmark ({len(release.pairwise)} pairs, {len(release.bon)} best-of-3 items) would "
        f"send {est['calls']} calls ({est['cached']} more already cached) before the check below"
    )


def with_benchmarks(cfg: DownstreamConfig, folders: list[str], release_dir: Path) -> DownstreamConfig:
    """``cfg`` with the demo's benchmark folders, its prompts held out of the demo's release by name (so that
    a dry run, which evaluates nothing, draws the prompts the run draws)."""
    holdout = cfg.prompts.holdout.model_copy(update={"releases": [str(release_dir)]})
    prompts = cfg.prompts.model_copy(update={"holdout": holdout})
    return cfg.model_copy(update={"benchmarks": folders, "prompts": prompts})
