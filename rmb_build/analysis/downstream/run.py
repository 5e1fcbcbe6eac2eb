"""The downstream check's pipeline: prompts held out from the benchmark, n policy samples per prompt, a grade
per sample (shared by every RM), each RM's score of every sample, then ``best_of_k`` and the correlations.

Every policy sample and LLM grade goes through the LLM layer's on-disk cache (``llm/cache.py``) and every RM
score and ``python:`` grade through ``rmb evaluate``'s score cache (``evaluate/cache.py``), so a second run
sends no request and scores no text; ``calls`` and ``scoring`` in downstream.json count what a run did. A
dry run runs the same steps against ``llm.planning.PlanningClient`` and the score cache's lookups: what it
counts is what the run then sends and scores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np

from rmb_build.analysis.downstream import best_of_k as bok
from rmb_build.analysis.downstream.config import DownstreamConfig, GraderConfig, RewardModelConfig
from rmb_build.core.errors import RMBError
from rmb_build.core.finite import describe, finite_float
from rmb_build.core.items import Answer, BonItem
from rmb_build.core.records import Query, Response
from rmb_build.core.redact import redact
from rmb_build.evaluate.adapters import RewardModel
from rmb_build.evaluate.cache import ScoreCache
from rmb_build.llm.types import ChatRequest, ChatResult
from rmb_build.stages.options import GeneratorConfig, JudgeConfig

if TYPE_CHECKING:
    from rmb_build.evaluate.scoring import ScoringStats
    from rmb_build.llm.client import LLMClient
    from rmb_build.llm.config import EndpointConfig
    from rmb_build.llm.planning import PlanningClient

PAIRWISE_PROMPT, JUDGE_SYSTEM = "rm_judge/pairwise.md", "rm_judge/system.md"
GRADE_SCALES = {"pointwise": (1.0, 10.0), "reference": (0.0, 1.0)}  # a python grader's is unknown


@dataclass
class Prompts:
    queries: list[Query]
    read: int
    dropped: list[dict[str, Any]] = field(default_factory=list)  # near-duplicates of a benchmark's prompts
    holdout_releases: list[str] = field(default_factory=list)
    not_drawn: int = 0


def _sample_name(i: int) -> str:
    return f"sample{i:03d}"


# ---- prompts ------------------------------------------------------------------------------------------


def benchmark_results(folders: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """(folder, results.json) of each ``rmb evaluate`` output folder; RMBError naming a folder without one."""
    out = []
    for folder in folders:
        path = Path(folder) / "results.json"
        try:
            out.append((str(folder), json.loads(path.read_text(encoding="utf-8"))))
        except FileNotFoundError:
            raise RMBError(f"benchmarks: {folder}: no results.json (expected an 'rmb evaluate --out' folder)") from None
        except json.JSONDecodeError as exc:
            raise RMBError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    return out


def load_prompts(cfg: DownstreamConfig, benchmarks: Sequence[tuple[str, dict[str, Any]]]) -> Prompts:
    """The configured sources' prompts, less those that are (near-)duplicates of a benchmark release's,
    then ``max_prompts`` of them drawn with the seed."""
    from rmb_build.stages.gather import gather

    got = gather(cfg.prompts.sources)
    queries = []
    for q in got.queries:
        if q.scenario_id is None and cfg.prompts.default_scenario:
            q = Query(q.id, q.conversation, q.source, q.source_id, q.language, cfg.prompts.default_scenario)
        queries.append(q)
    if not queries:
        raise RMBError(f"prompts.sources: no usable prompts ({got.stats})")
    if cfg.grader.kind == "pointwise":
        missing = [q for q in queries if not q.scenario_id]
        if missing:
            raise RMBError(
                f"prompts: {len(missing)} prompts (first {missing[0].source_id!r}) have no scenario, whose criteria "
                "the pointwise grader needs; set prompts.default_scenario (e.g. Helpfulness/Chat/Discussion)"
            )
    out = Prompts(queries, len(queries))
    if cfg.prompts.holdout.releases is None:  # the releases the benchmarks scored, found and confirmed
        from rmb_build.analysis.downstream.holdout import scored_releases

        releases = scored_releases(benchmarks)
    else:
        from rmb_build.benchmarks.formats import open_release

        releases = [(rel, open_release(rel)) for rel in cfg.prompts.holdout.releases]
    if releases:
        from rmb_build.analysis.contamination import held_out

        for rel, release in releases:
            queries, dropped = held_out(queries, release, cfg.prompts.holdout.threshold, cfg.prompts.holdout.model)
            out.dropped += [{**d, "release": rel} for d in dropped]
        out.holdout_releases = [rel for rel, _ in releases]
    if cfg.prompts.max_prompts is not None and len(queries) > cfg.prompts.max_prompts:
        drawn = set(random.Random(cfg.prompts.seed).sample(range(len(queries)), cfg.prompts.max_prompts))
        out.not_drawn = len(queries) - len(drawn)
        queries = [q for i, q in enumerate(queries) if i in drawn]
    out.queries = queries
    return out


# ---- policy samples and grades ------------------------------------------------------------------------


def policy_generators(cfg: DownstreamConfig) -> list[GeneratorConfig]:
    """The policy as n generators that differ only by seed (and name): n samples per prompt."""
    p = cfg.policy
    return [
        GeneratorConfig(
            endpoint=p.endpoint,
            model=p.model,
            name=_sample_name(i),
            temperature=p.temperature,
            top_p=p.top_p,
            max_tokens=p.max_tokens,
            system_prompt=p.system_prompt,
            seed=i,
        )
        for i in range(p.n)
    ]


async def sample(
    cfg: DownstreamConfig, queries: Sequence[Query], client: LLMClient | PlanningClient
) -> dict[str, list[Response]]:
    """Each prompt's samples that came back non-empty, in sample order."""
    from rmb_build.stages.common import responses_by_query
    from rmb_build.stages.generate import generate

    return responses_by_query((await generate(queries, policy_generators(cfg), client)).records)


def _judge_config(g: GraderConfig) -> JudgeConfig:
    return JudgeConfig(
        endpoint=g.endpoint,
        model=g.model,
        samples=g.samples,
        temperature=g.temperature,
        max_tokens=g.max_tokens,
        max_reasks=g.max_reasks,
        rationale_chars=g.rationale_chars,
    )


def _pair_requests(g: GraderConfig, q: Query, first: str, second: str, tag: str) -> ChatRequest:
    from rmb_build.core.prompting import load_prompt
    from rmb_build.core.text import fill, render_conversation
    from rmb_build.evaluate.adapters.openai import PAIRWISE_SCHEMA

    prompt = fill(
        load_prompt(PAIRWISE_PROMPT),
        criteria="",
        conversation=render_conversation([(t.role, t.content) for t in q.conversation]),
        answer_a=first,
        answer_b=second,
    )
    return ChatRequest(
        g.endpoint,
        g.model,
        (("system", load_prompt(JUDGE_SYSTEM).strip()), ("user", prompt)),
        temperature=g.temperature,
        max_tokens=g.max_tokens,
        response_schema=PAIRWISE_SCHEMA,
        schema_name="verdict",
        max_reasks=g.max_reasks,
        stage="grader",
        tag=tag,
    )


async def grade_llm(
    cfg: DownstreamConfig,
    queries: Sequence[Query],
    samples: dict[str, list[Response]],
    client: LLMClient | PlanningClient,
) -> dict[tuple[str, str], float]:
    """(query id, sample name) -> grade: the pointwise judge's mean 1-10 score, or the reference grade
    (1 a win in both orders, 0.5 a split, 0 a loss in both; a failed verdict leaves the sample ungraded)."""
    g = cfg.grader
    responses = [r for rs in samples.values() for r in rs]
    if g.kind == "pointwise":
        from rmb_build.stages.judge import judge

        got = await judge(queries, responses, _judge_config(g), client)
        return {(s.query_id, s.generator): s.mean for s in got.records}
    from rmb_build.stages.generate import generate

    ref = g.reference
    reference = GeneratorConfig(endpoint=ref.endpoint, model=ref.model, name="reference", temperature=0.0,
                                top_p=ref.top_p, max_tokens=ref.max_tokens)  # fmt: skip
    refs = {r.query_id: r.text for r in (await generate(queries, [reference], client)).records}
    by_id = {q.id: q for q in queries}
    reqs, targets = [], []
    for r in responses:
        if r.query_id in refs:
            q = by_id[r.query_id]
            tag = f"{r.query_id}:{r.generator}"
            reqs += [
                _pair_requests(g, q, r.text, refs[r.query_id], tag),
                _pair_requests(g, q, refs[r.query_id], r.text, tag),
            ]
            targets.append((r.query_id, r.generator))
    results: list[ChatResult] = await client.chat_many(reqs, desc="grader") if reqs else []
    out = {}
    for n, key in enumerate(targets):
        ab, ba = results[2 * n], results[2 * n + 1]
        if ab.ok and ba.ok and isinstance(ab.parsed, dict) and isinstance(ba.parsed, dict):
            out[key] = ((ab.parsed.get("winner") == "A") + (ba.parsed.get("winner") == "B")) / 2
    return out


def bon_items(queries: Sequence[Query], samples: dict[str, list[Response]]) -> list[BonItem]:
    """Each prompt's samples as one Best-of-N item (the RM scoring path of ``rmb evaluate``); the first
    sample stands as ``best`` only because an item needs one."""
    items = []
    for q in queries:
        rs = samples.get(q.id, [])
        if len(rs) >= 2:
            answers = [Answer(r.generator, r.text) for r in rs]
            items.append(BonItem(q.id, q.conversation, answers[0], tuple(answers[1:]), q.scenario_id or ""))
    return items


# ---- reward models ------------------------------------------------------------------------------------


def load_reward_model(r: RewardModelConfig, cfg: DownstreamConfig, llm_cache: Path) -> RewardModel:
    from rmb_build.evaluate.adapters import RMOptions, load_rm

    options = RMOptions(**r.options(), endpoints=cfg.endpoints, llm_cache_dir=str(llm_cache))
    rm = load_rm(r.rm, options)
    if rm.compares_pairs:
        raise RMBError(f"reward_models: {rm.spec}: compares pairs; a best-of-n pick needs a score per answer")
    return rm


def run_endpoints(cfg: DownstreamConfig, rms: dict[str, RewardModel]) -> dict[str, Any]:
    """The endpoints of the run's client: the config's, and each generative RM's own endpoint that is not one
    of them (``openai:<model>@<URL>``) as ``reward_models[i]``, the name that RM then asks under. Every RM asks
    through the run's client (one budget, one accounting), wherever its endpoint is."""
    endpoints = dict(cfg.endpoints)
    for i, rm in enumerate(rms.values()):
        own = getattr(rm, "endpoints", None)
        if own is not None and own[rm.endpoint] is not cfg.endpoints.get(rm.endpoint):
            name = f"reward_models[{i}]"
            while name in cfg.endpoints:  # a config may name an endpoint anything
                name += "'"
            rm.ask_as(name)
            endpoints[name] = rm.endpoints[name]
    return endpoints


def score_with(
    rm: RewardModel, items: Sequence[BonItem], cache: ScoreCache, client: LLMClient | None, progress: bool
) -> tuple[dict[str, Any], ScoringStats]:
    """(text key -> score, scoring stats) through the score cache; a generative RM asks through ``client``
    (the run's: one budget, one accounting)."""
    from rmb_build.evaluate.scoring import score_items

    if hasattr(rm, "client") and client is not None:
        rm.client = client
    try:
        values, _, stats = score_items(items, rm, cache, progress=progress)
    finally:
        if hasattr(rm, "client"):
            rm.client = None  # the run's client outlives this RM
        rm.close()
    return values, stats


def plan_scoring(
    rm: RewardModel, items: Sequence[BonItem], cache: ScoreCache, planner: PlanningClient
) -> dict[str, int]:
    """What scoring ``items`` would do: texts not in the score cache, and a generative RM's requests."""
    from rmb_build.evaluate.scoring import collect_texts

    texts = collect_texts(items, per_scenario=rm.per_scenario)
    cached = cache.get_many(rm.fingerprint(), (t.key for t in texts))
    missing = [t for t in texts if t.key not in cached]
    if missing and hasattr(rm, "client"):  # a generative RM asks the planner (LLMClient.run's signature)
        rm.client = planner
        try:
            for _ in rm.score_stream(missing):
                pass
        finally:
            rm.client = None
    return {"texts": len(texts), "to_score": len(missing), "cached": len(texts) - len(missing)}


def _scores_of(rm: RewardModel, item: BonItem, values: dict[str, Any]) -> list[float | None]:
    from rmb_build.evaluate.scoring import item_keys

    return [values.get(k) for k in item_keys([item], rm.per_scenario)[0]]


def is_grader(rm: RewardModel, grader: GraderConfig, grader_rm: RewardModel | None, scores, grades) -> bool:
    """The grader itself: the same ``python:`` function, or scores equal to the grades on every sample."""
    if grader_rm is not None and rm.kind == grader_rm.kind and rm.fingerprint() == grader_rm.fingerprint():
        return True
    return bool(np.array_equal(np.asarray(scores, dtype=float), np.asarray(grades, dtype=float)))


def shares_grader_model(rm: RewardModel, grader: GraderConfig, cfg: DownstreamConfig) -> bool:
    """A generative RM on the grader's endpoint and model: it grades with a different prompt, but favours what
    its own model likes (flagged in the report)."""
    if rm.kind != "openai" or grader.kind == "python":
        return False
    from rmb_build.llm import endpoint_identity

    same_ep = endpoint_identity(rm.endpoints[rm.endpoint]) == endpoint_identity(cfg.endpoints[grader.endpoint])
    return same_ep and rm.model == grader.model


# ---- benchmark figures ----------------------------------------------------------------------------------


def figure_value(results: dict[str, Any], figure: str, where: str = "results.json") -> float | None:
    """``rmb_overall`` (its mean), ``rmb_overall/<set>/<goal>`` (a cell), or a dotted path to a number; None where
    there is none, RMBError naming ``where`` for NaN or an infinity (an older rmb wrote them)."""
    value: object
    if figure == "rmb_overall":
        value = (results.get("rmb_overall") or {}).get("mean")
    elif figure.startswith("rmb_overall/"):
        value = ((results.get("rmb_overall") or {}).get("cells") or {}).get(figure.removeprefix("rmb_overall/"))
    else:
        value = results
        for part in figure.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    number = finite_float(value)
    if number is None:
        raise RMBError(f"{where}: field {figure!r} is {describe(value)}, not a finite number")
    return number


def figure_interval(results: dict[str, Any], figure: str) -> list[float] | None:
    """The 95% interval results.json gives ``rmb_overall`` or one of its cells; None for another figure."""
    if figure != "rmb_overall" and not figure.startswith("rmb_overall/"):
        return None
    cell = "mean" if figure == "rmb_overall" else figure.removeprefix("rmb_overall/")
    ci = ((results.get("rmb_overall") or {}).get("ci95") or {}).get(cell)
    ok = isinstance(ci, list) and len(ci) == 2 and all(finite_float(v) is not None for v in ci)
    return [float(ci[0]), float(ci[1])] if ok else None


def match_benchmarks(rms: dict[str, RewardModel], benchmarks: Sequence[tuple[str, dict[str, Any]]]) -> dict:
    """Per RM key: its benchmark folder (same spec and fingerprint in results.json), or why it has none."""
    out: dict[str, dict[str, Any]] = {}
    for key, rm in rms.items():
        fp = rm.fingerprint()
        same_spec = [(f, r) for f, r in benchmarks if redact(str(r.get("rm"))) == rm.spec]
        found = [(f, r) for f, r in same_spec if r.get("fingerprint") == fp]
        if found:
            out[key] = {"folder": found[0][0], "results": found[0][1]}
        elif same_spec:
            out[key] = {"missing": f"{same_spec[0][0]} scored {rm.spec} with other settings (its fingerprint differs)"}
        else:
            out[key] = {"missing": "no benchmark folder scored this RM"}
    return out


# ---- the whole check ------------------------------------------------------------------------------------


# the LLM layer's stage names, as this check calls them
STAGE_NAMES = {
    "generate": "policy and reference answers",
    "judge": "grader",
    "grader": "grader",
    "evaluate": "reward_models",
}


def _usage_calls(client: LLMClient) -> dict[str, dict[str, int]]:
    """Requests sent (re-asks included), answered from the cache, and failed, per step of the check."""
    out: dict[str, dict[str, int]] = {}
    for stage, models in client.usage().items():
        row = out.setdefault(STAGE_NAMES.get(stage, stage), {"requests": 0, "cached": 0, "failed": 0})
        for m in models.values():
            for k in row:
                row[k] += int(m.get(k, 0))
    return out


def run_downstream(
    cfg: DownstreamConfig,
    run_dir: str | Path,
    *,
    dry_run: bool = False,
    max_cost: float | None = None,
    progress: bool = False,
    score_cache: str | Path | None = None,
    log=print,
) -> dict[str, Any]:
    """The check; returns downstream.json's object (``dry_run``: the plan instead)."""
    from rmb_build.llm import LLMClient

    run_dir = Path(run_dir)
    llm_cache = run_dir / "llm_cache"
    score_dir = Path(score_cache) if score_cache else run_dir / "score_cache"
    rms = {}
    for i, r in enumerate(cfg.reward_models):  # a wrong spec stops the check before any work
        try:
            rms[r.key] = load_reward_model(r, cfg, llm_cache)
        except RMBError as exc:
            raise RMBError(f"reward_models[{i}] ({redact(r.rm)}): {exc}") from None
    benchmarks = benchmark_results(cfg.benchmarks)
    for folder, results in benchmarks:  # a NaN figure stops the check before any work
        for figure in cfg.figures:
            figure_value(results, figure, f"{folder}/results.json")
    prompts = load_prompts(cfg, benchmarks)
    log(
        f"prompts: {len(prompts.queries)} ({prompts.read} read, {len(prompts.dropped)} dropped as near-duplicates "
        f"of the benchmark, {prompts.not_drawn} not drawn)"
    )
    grader_rm = None
    if cfg.grader.kind == "python":
        from rmb_build.evaluate.adapters import RMOptions, load_rm

        grader_rm = load_rm(f"python:{cfg.grader.function}", RMOptions())
    if dry_run:
        return _plan(cfg, prompts, rms, grader_rm, llm_cache, score_dir)

    limit = max_cost if max_cost is not None else cfg.max_cost
    with (
        LLMClient(run_endpoints(cfg, rms), llm_cache, max_cost=limit, progress=progress) as client,
        ScoreCache(score_dir) as cache,
    ):

        def score(
            rm: RewardModel, items: Sequence[BonItem], via: LLMClient | None
        ) -> tuple[dict[str, Any], dict[str, Any]]:
            values, stats = score_with(rm, items, cache, via, progress)
            return values, stats.to_json()

        items, grades, rm_scores, scoring = _steps(cfg, prompts, rms, grader_rm, client, score)
        calls = _usage_calls(client)
    return _results(cfg, prompts, items, grades, rms, rm_scores, grader_rm, benchmarks, calls, scoring)


def _steps(cfg, prompts: Prompts, rms, grader_rm, client: LLMClient | PlanningClient, score):
    """The check's steps in their one order, for the run (``client`` an ``LLMClient``, ``score`` scoring through
    the score cache) and the dry run (a ``PlanningClient``, ``score`` counting what would be scored, no values):
    policy samples, the LLM grades, the ``python:`` grader's, every RM's scores. Returns the BoN items, the
    grades, each RM's scores per item and what each scoring did. Requests are counted by their stage
    (``STAGE_NAMES``), in the run's usage and the plan alike."""

    async def llm_part():
        s = await sample(cfg, prompts.queries, client)
        grades = {} if grader_rm else await grade_llm(cfg, prompts.queries, s, client)
        return s, grades

    samples, grades = asyncio.run(llm_part())
    items = bon_items(prompts.queries, samples)
    scoring: dict[str, Any] = {}
    rm_scores: dict[str, dict[str, list[float | None]]] = {}
    if grader_rm is not None:
        values, scoring["grader"] = score(grader_rm, items, None)
        for item in items:
            for a, v in zip(item.answers(), _scores_of(grader_rm, item, values)):
                if v is not None:
                    grades[(item.uid, a.llm_name)] = float(v)
    for key, rm in rms.items():
        values, scoring[key] = score(rm, items, client)
        rm_scores[key] = {item.uid: _scores_of(rm, item, values) for item in items}
    return items, grades, rm_scores, scoring


@contextlib.contextmanager
def planning_client(endpoints: Mapping[str, EndpointConfig], llm_cache: Path) -> Iterator[PlanningClient]:
    """A ``PlanningClient`` that answers from the run's LLM cache, read only (none yet: nothing cached)."""
    from rmb_build.llm.cache import ResponseCache
    from rmb_build.llm.planning import PlanningClient

    llm = ResponseCache(llm_cache, create=False) if (llm_cache / "responses.sqlite").exists() else None
    try:
        yield PlanningClient(endpoints, llm)
    finally:
        if llm is not None:
            llm.close()


def _plan(cfg, prompts: Prompts, rms, grader_rm, llm_cache: Path, score_dir: Path) -> dict[str, Any]:
    """The dry run: the run's steps (``_steps``) against a PlanningClient (cached replies real, the rest
    stand-ins) and the score cache's lookups. Policy, reference and grader calls are exact; RM texts are counted
    on the stand-in samples (one distinct text each), so they are exact when every real sample is distinct."""
    with planning_client(run_endpoints(cfg, rms), llm_cache) as planner, ScoreCache(score_dir) as cache:

        def count(
            rm: RewardModel, items: Sequence[BonItem], _via: PlanningClient | None
        ) -> tuple[dict[str, Any], dict[str, Any]]:
            try:
                return {}, plan_scoring(rm, items, cache, planner)
            finally:
                rm.close()

        _, _, _, texts = _steps(cfg, prompts, rms, grader_rm, planner, count)
    estimate = planner.report()
    by_phase: dict[str, dict[str, Any]] = {}
    for stage, row in estimate["by_phase"].items():  # named as the run's ``calls`` names them
        merged = by_phase.setdefault(STAGE_NAMES.get(stage, stage), dict.fromkeys(row, 0))
        for k, v in row.items():
            merged[k] += v
    return {
        "dry_run": True,
        "n_prompts": len(prompts.queries),
        "n_samples": cfg.policy.n,
        "prompts": _prompts_json(prompts),
        "estimate": {**estimate, "by_phase": by_phase},
        "texts_to_score": texts,
    }


def _prompts_json(prompts: Prompts) -> dict[str, Any]:
    return {
        "read": prompts.read,
        "used": len(prompts.queries),
        "dropped_near_duplicates": len(prompts.dropped),
        "holdout_releases": prompts.holdout_releases,
        "dropped": prompts.dropped,
        "not_drawn": prompts.not_drawn,
    }


def _results(cfg, prompts, items, grades, rms, rm_scores, grader_rm, benchmarks, calls, scoring) -> dict[str, Any]:
    """downstream.json's object from the grades and every RM's scores."""
    n = cfg.policy.n
    names = [_sample_name(i) for i in range(n)]
    complete = [
        it
        for it in items
        if len(it.answers()) == n
        and all((it.uid, a) in grades for a in names)
        and all(None not in rm_scores[k][it.uid] for k in rms)
    ]
    if not complete:
        raise RMBError("no prompt has all its samples generated, graded and scored; see the counts above")
    g = [[grades[(it.uid, a)] for a in names] for it in complete]
    res, seed = cfg.bootstrap.resamples, cfg.bootstrap.seed
    scale = GRADE_SCALES.get(cfg.grader.kind)
    oracle = bok.summarize(g, g, resamples=res, seed=seed, scale=scale)
    ks = bok.ks_for(n)
    random_pick = {"score": oracle["best_of_k"]["1"], "best_of_k": {str(k): oracle["best_of_k"]["1"] for k in ks}}
    random_pick["ci95"] = bok.bootstrap_mean(np.mean(g, axis=1), res, seed, scale)
    matched = match_benchmarks(rms, benchmarks)
    out_rms: dict[str, Any] = {}
    per_prompt: dict[str, np.ndarray] = {}
    for key, rm in rms.items():
        s = [rm_scores[key][it.uid] for it in complete]
        summary = bok.summarize(s, g, resamples=res, seed=seed, scale=scale)
        per_prompt[key] = summary.pop("per_prompt")
        bench = matched[key]
        out_rms[key] = {
            **summary,
            "spec": rm.spec,
            "fingerprint": rm.fingerprint(),
            "is_grader": is_grader(rm, cfg.grader, grader_rm, s, g),
            "shares_grader_model": shares_grader_model(rm, cfg.grader, cfg),
            "benchmark": bench.get("folder"),
            "benchmark_missing": bench.get("missing"),
            "figures": {f: figure_value(bench["results"], f, f"{bench['folder']}/results.json") for f in cfg.figures}
            if "results" in bench
            else {},
            "figure_ci95": {f: figure_interval(bench["results"], f) for f in cfg.figures} if "results" in bench else {},
        }
    correlations = []
    for figure in cfg.figures:
        keys = [k for k, v in out_rms.items() if not v["is_grader"] and v["figures"].get(figure) is not None]
        x = np.array([out_rms[k]["figures"][figure] for k in keys])
        pp = np.array([per_prompt[k] for k in keys]) if keys else np.zeros((0, len(complete)))
        c = bok.correlate(x, pp, resamples=res, seed=seed)
        correlations.append({"benchmark_figure": figure, **c, "rms": keys})
    oracle.pop("per_prompt")
    oracle.pop("oracle_agreement")
    return {
        "schema_version": 1,
        "name": cfg.name,
        "n_prompts": len(complete),
        "n_samples": n,
        "rms": out_rms,
        "oracle": oracle,
        "random": random_pick,
        "correlations": correlations,
        "without_benchmark": {k: v["benchmark_missing"] for k, v in out_rms.items() if v["benchmark"] is None},
        "grader": cfg.grader.model_dump(mode="json", exclude_none=True),
        "policy": cfg.policy.model_dump(mode="json", exclude_none=True),
        "prompts": {
            **_prompts_json(prompts),
            "incomplete": len(items) - len(complete) + (len(prompts.queries) - len(items)),
        },
        "calls": calls,
        "scoring": scoring,
        "bootstrap": {"resamples": res, "seed": seed},
        "interval_method": "bootstrap percentile over prompts; where every draw gives one value, mid-p or Wilson's "
        "interval at the effective size of the grades rescaled to [0, 1] (rmb_build/core/intervals.py); null where "
        "the grades' scale is unknown (a python grader)",
    }
