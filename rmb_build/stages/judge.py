"""Judge: pointwise 1-10 scores with a short rationale, k samples per answer, scenario-specific criteria.

Helpfulness answers are judged against their task's criteria, harmlessness answers against the
harmlessness criteria (``prompting.criteria_for``). The LLM layer parses each reply against
``SCHEMA`` and re-asks up to ``cfg.max_reasks`` times; an answer with no usable sample becomes a
Failure, never an exception.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rmb_build.core.prompting import criteria_path, load_prompt
from rmb_build.core.records import Failure, JudgeScore, Query, Response
from rmb_build.core.text import fill, render_conversation
from rmb_build.llm.structured import MAX_SCORE, MIN_SCORE, first_json_object, score_reply_schema
from rmb_build.llm.types import ChatClient, ChatRequest, ChatResult
from rmb_build.stages.common import (
    ask,
    endpoint_of,
    endpoints_of,
    estimate_tokens,
    finished_only,
    fit_texts,
    index_queries,
    input_token_budget,
)
from rmb_build.stages.options import JudgeConfig
from rmb_build.stages.plan import Planned
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

STAGE = "judge"  # the stage's one name: its SPEC's, its requests' and failures' stage
SYSTEM_PROMPT = "judge/system.md"
USER_PROMPT = "judge/pointwise.md"
RATIONALE_KEEP_CHARS = 2000  # endpoints without a grammar may ignore maxLength

SCHEMA: dict[str, Any] = score_reply_schema()


@dataclass(frozen=True)
class Judgement:
    score: float
    rationale: str


_SCORE_RE = re.compile(r"\bscore\"?\s*[:=]\s*\"?(\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_judgement(parsed: object, text: str | None) -> Judgement | str:
    """A judge reply as a Judgement, or a short description of what is wrong with it.

    Uses the schema-parsed object when the LLM layer gave one, else the first JSON object in the
    text, else a ``score: N`` in the text (small models often write that instead of JSON).
    """
    obj = parsed if isinstance(parsed, dict) else first_json_object(text or "")
    if isinstance(obj, dict) and "score" in obj:
        raw, rationale = obj.get("score"), obj.get("rationale", "")
    else:
        m = _SCORE_RE.search(text or "")
        if not m:
            return "no JSON object with a 'score' field"
        raw, rationale = m.group(1), ""
    if raw is None:
        return "'score' is None, not a number"
    try:
        score = float(raw)
    except OverflowError:  # an integer too large for a float: out of range
        return f"'score' {str(raw)[:20]}... is outside {MIN_SCORE}-{MAX_SCORE}"
    except (TypeError, ValueError):
        return f"'score' is {raw!r}, not a number"
    if not MIN_SCORE <= score <= MAX_SCORE:
        return f"'score' {raw!r} is outside {MIN_SCORE}-{MAX_SCORE}"
    if not isinstance(rationale, str):
        rationale = json.dumps(rationale, ensure_ascii=False)
    return Judgement(score, rationale.strip()[:RATIONALE_KEEP_CHARS])


def _judge_prompt(
    query: Query, answer: str, criteria: str, max_input_tokens: int
) -> tuple[tuple[tuple[str, str], ...], int]:
    system = load_prompt(SYSTEM_PROMPT).strip()
    template = load_prompt(USER_PROMPT)
    budget = max_input_tokens - estimate_tokens(system + template + criteria)
    texts, cut = fit_texts([t.content for t in query.conversation] + [answer], max(budget, 64))
    turns = [(t.role, c) for t, c in zip(query.conversation, texts)]
    user = fill(template, criteria=criteria.strip(), conversation=render_conversation(turns), answer=texts[-1])
    return (("system", system), ("user", user)), cut


def _criteria_or_problem(q: Query | None, r: Response) -> tuple[str | None, str | None]:
    """(the criteria file to judge ``r`` by, None), or (None, why it cannot be judged)."""
    if q is None:
        return None, "response to a query that is not among the queries given"
    if not q.scenario_id:
        return None, "query has no scenario (not classified)"
    if not r.text.strip():
        return None, "empty answer"
    try:
        return criteria_path(q.scenario_id), None
    except FileNotFoundError as exc:
        return None, str(exc)


Target = tuple[Response, str]  # the response judged, and the criteria file it is judged by


def prepare(
    queries: Sequence[Query],
    responses: Sequence[Response],
    cfg: JudgeConfig,
    endpoints: Mapping[str, Any] | None = None,
) -> Planned[Target]:
    """``cfg.samples`` requests per judgeable response (one target per response, its samples in a row)."""
    by_id = index_queries(queries)
    out: Planned[Target] = Planned()
    budget = input_token_budget(endpoint_of(None, cfg.endpoint, endpoints), cfg.max_tokens)
    seen: set[tuple[str, str]] = set()
    inputs_cut = 0
    # Answers to one query, and queries judged by one criteria file, go one after another: a server
    # that keeps the previous prompt's KV cache (llama.cpp) then re-reads only what differs.
    schema = score_reply_schema(cfg.rationale_chars)
    ordered = sorted(
        responses, key=lambda r: (_criteria_or_problem(by_id.get(r.query_id), r)[0] or "", r.query_id, r.generator)
    )
    for r in ordered:
        if (r.query_id, r.generator) in seen:
            out.stats["duplicate_responses"] = out.stats.get("duplicate_responses", 0) + 1
            continue
        seen.add((r.query_id, r.generator))
        q = by_id.get(r.query_id)
        crit, problem = _criteria_or_problem(q, r)
        if problem:
            out.failures.append(Failure(STAGE, r.query_id, r.generator, problem))
            continue
        assert q is not None and crit is not None  # _criteria_or_problem gives a problem otherwise
        messages, cut = _judge_prompt(q, r.text, load_prompt(crit), budget)
        inputs_cut += bool(cut)
        out.targets.append((r, crit))
        for k in range(cfg.samples):  # seed k: samples differ, and a re-run without the cache asks the same
            out.requests.append(
                cfg.request(
                    messages,
                    stage=STAGE,
                    tag=f"{r.query_id}:{r.generator}",
                    seed=k,
                    sample_index=k,
                    response_schema=schema,
                    schema_name="judgement",
                    max_reasks=cfg.max_reasks,
                )
            )
    out.stats["inputs_cut"] = inputs_cut
    return out


def plan(
    queries: Sequence[Query],
    responses: Sequence[Response],
    cfg: JudgeConfig,
    endpoints: Mapping[str, Any] | None = None,
) -> list[ChatRequest]:
    """The requests :func:`judge` sends for ``responses``."""
    return prepare(queries, responses, cfg, endpoints).requests


def collect(planned: Planned[Target], results: Sequence[ChatResult], cfg: JudgeConfig) -> StageResult[list[JudgeScore]]:
    """A JudgeScore per response with a usable sample among its ``cfg.samples`` results."""
    records: list[JudgeScore] = []
    failures = list(planned.failures)
    judge_name = f"{cfg.endpoint}/{cfg.model}"
    outcomes = [parse_judgement(res.parsed, res.text) if res.ok else (res.error or "no reply") for res in results]
    failed_samples = 0
    for n, (r, crit) in enumerate(planned.targets):
        samples = outcomes[n * cfg.samples : (n + 1) * cfg.samples]
        good = [s for s in samples if isinstance(s, Judgement)]
        failed_samples += len(samples) - len(good)
        if not good:
            failures.append(
                Failure(STAGE, r.query_id, r.generator, f"no usable judgement in {len(samples)} samples: {samples[-1]}")
            )
            continue
        scores = tuple(s.score for s in good)
        records.append(
            JudgeScore(
                r.query_id,
                r.generator,
                scores,
                statistics.fmean(scores),
                statistics.pstdev(scores),
                tuple(s.rationale for s in good),
                judge_name,
                crit,
                len(samples) - len(good),
            )
        )
    stats = {
        **planned.stats,
        "requests": len(planned.requests),
        "failed_samples": failed_samples,
        "reasks": sum(max(len(res.raw_texts) - 1, 0) for res in results),
        "scored": len(records),
        "failures": len(failures),
    }
    return StageResult(records, failures, stats)


async def judge(
    queries: Sequence[Query],
    responses: Sequence[Response],
    cfg: JudgeConfig,
    client: ChatClient,
    *,
    endpoints: Mapping[str, Any] | None = None,
) -> StageResult[list[JudgeScore]]:
    """``cfg.samples`` pointwise judgements per response; a JudgeScore per response with a usable one."""
    planned = prepare(queries, responses, cfg, endpoints_of(client, endpoints))
    return collect(planned, await ask(client, planned.requests, desc=STAGE), cfg)


async def judge_batch(
    env: StageEnv, queries: Sequence[Query], responses: Sequence[Response]
) -> StageResult[list[JudgeScore]]:
    return await judge(queries, responses, env.section, env.chat())


SPEC = StageSpec(
    STAGE,
    judge_batch,
    config="judge",
    endpoints=lambda judge_cfg: [judge_cfg.endpoint],
    prompts=("judge", "criteria"),
    llm=True,
    counts="answers",
    at=Position.VERDICTS,
    takes=finished_only,
)
