"""Generate: answers from several models per query, each with its own system prompt and sampling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rmb_build.core.errors import ConfigError
from rmb_build.core.records import Failure, Query, Response
from rmb_build.llm.types import ChatClient, ChatRequest, ChatResult
from rmb_build.stages.common import (
    ask,
    endpoint_of,
    endpoints_of,
    estimate_tokens,
    fit_texts,
    index_queries,
    input_token_budget,
)
from rmb_build.stages.judge import STAGE as JUDGE_STAGE
from rmb_build.stages.options import GeneratorConfig
from rmb_build.stages.plan import Planned
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the run is the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.stages.flow import Batch, Flow

STAGE = "generate"  # the stage's one name: its SPEC's, its requests' and failures' stage
Target = tuple[Query, GeneratorConfig, int]  # the query, its generator, characters cut from its conversation


def check_generators(generators: Sequence[GeneratorConfig]) -> None:
    """Two generators with one llm_name would make their answers indistinguishable in a release."""
    seen: dict[str, int] = {}
    for i, g in enumerate(generators):
        if g.llm_name in seen:
            raise ConfigError(
                "<config>",
                f"generators[{i}].name",
                f"{g.llm_name!r} is already the name of generators[{seen[g.llm_name]}]; give each a distinct 'name'",
            )
        seen[g.llm_name] = i


def check_generation(cfg: BuildConfig, stages: Sequence[str]) -> None:
    """Preflight's check of the generators: distinct names, and the cast (``BuildConfig.check_cast``: enough
    distinct models, and a judge that is none of them where ``judge`` runs)."""
    check_generators(cfg.generators)
    cfg.check_cast(judging=JUDGE_STAGE in stages)


def build_request(query: Query, gen: GeneratorConfig, max_input_tokens: int) -> tuple[ChatRequest, int]:
    """The request for one (query, generator), its conversation cut to fit; returns it and the chars cut."""
    contents, cut = fit_texts([t.content for t in query.conversation], max_input_tokens)
    messages = [(t.role, c) for t, c in zip(query.conversation, contents)]
    if gen.system_prompt:
        # One system message: many chat templates reject a second one.
        if messages and messages[0][0] == "system":
            messages[0] = ("system", f"{gen.system_prompt}\n\n{messages[0][1]}")
        else:
            messages.insert(0, ("system", gen.system_prompt))
    return gen.request(messages, stage=STAGE, tag=query.id, seed=gen.seed, stop=tuple(gen.stop)), cut


def _unanswerable(query: Query) -> str | None:
    if not query.conversation:
        return "empty conversation"
    if query.conversation[-1].role != "user":
        return f"conversation ends with a {query.conversation[-1].role!r} turn, not a user turn"
    return None


def prepare(
    queries: Sequence[Query], generators: Sequence[GeneratorConfig], endpoints: Mapping[str, Any] | None = None
) -> Planned[Target]:
    """One request per answerable (query, generator); ``endpoints`` (name -> EndpointConfig) sets how
    much conversation fits each model: longer turns are cut in the middle and the cut is counted."""
    check_generators(generators)
    unique = index_queries(queries)
    out: Planned[Target] = Planned(stats={"duplicate_queries": len(queries) - len(unique)})
    for q in unique.values():
        problem = _unanswerable(q)
        for gen in generators:
            if problem:
                out.failures.append(Failure(STAGE, q.id, gen.llm_name, problem))
                continue
            budget = input_token_budget(
                endpoint_of(None, gen.endpoint, endpoints), gen.max_tokens, estimate_tokens(gen.system_prompt or "")
            )
            req, cut = build_request(q, gen, budget)
            out.targets.append((q, gen, cut))
            out.requests.append(req)
    return out


def plan(
    queries: Sequence[Query], generators: Sequence[GeneratorConfig], endpoints: Mapping[str, Any] | None = None
) -> list[ChatRequest]:
    """The requests :func:`generate` sends for ``queries``."""
    return prepare(queries, generators, endpoints).requests


def collect(planned: Planned[Target], results: Sequence[ChatResult]) -> StageResult[list[Response]]:
    """Responses from the results of ``planned.requests``; failed or empty replies become Failures."""
    records: list[Response] = []
    failures = list(planned.failures)
    for (q, gen, cut), res in zip(planned.targets, results):
        text = (res.text or "").strip()
        if not res.ok:
            failures.append(Failure(STAGE, q.id, gen.llm_name, res.error or "no reply"))
        elif not text:
            failures.append(Failure(STAGE, q.id, gen.llm_name, f"empty answer (finish_reason={res.finish_reason})"))
        else:
            records.append(
                Response(
                    q.id,
                    gen.llm_name,
                    gen.model,
                    gen.endpoint,
                    text,
                    res.finish_reason,
                    cut,
                    res.usage.prompt_tokens,
                    res.usage.completion_tokens,
                )
            )
    stats = {
        **planned.stats,
        "requests": len(planned.requests),
        "responses": len(records),
        "failures": len(failures),
        "inputs_cut": sum(1 for _, _, c in planned.targets if c),
        "chars_cut": sum(c for _, _, c in planned.targets),
        "cut_by_max_tokens": sum(1 for r in records if r.finish_reason == "length"),
    }
    return StageResult(records, failures, stats)


async def generate(
    queries: Sequence[Query],
    generators: Sequence[GeneratorConfig],
    client: ChatClient,
    *,
    endpoints: Mapping[str, Any] | None = None,
) -> StageResult[list[Response]]:
    """One answer per (query, generator) through ``client.chat_many``; failures recorded, never raised.

    ``endpoints`` defaults to the client's (see :func:`prepare`).
    """
    planned = prepare(queries, generators, endpoints_of(client, endpoints))
    return collect(planned, await ask(client, planned.requests, desc=STAGE))


def _what_generation_reads(query: Query) -> dict[str, Any]:
    """A query as its answers depend on it: routing a query to another goal keeps its answers."""
    record = query.to_json()
    return {"id": record["id"], "conversation": record["conversation"]}


async def generate_batch(env: StageEnv, queries: Sequence[Query]) -> StageResult[list[Response]]:
    return await generate(queries, env.section, env.chat())


async def answer_batch(run: BuildRun, batch: Batch) -> None:
    """The batch's first answers: every generator's, awaited through the run's step."""
    queries = batch.queries
    run.log.info("%s: batch of %d queries x %d generators started", STAGE, len(queries), len(run.cfg.generators))
    done = batch.outcomes[STAGE] = await run.acall(SPEC, queries)
    batch.answers = done.value.records
    run.log.info("%s: batch of %d queries -> %d answers", STAGE, len(queries), len(batch.answers))


def count_answers(run: BuildRun, flow: Flow, kept: list[StageResult[None]]) -> None:
    """The run summary's ``responses``: the answers every batch generated (each batch's ``responses`` count)."""
    flow.result["responses"] = sum(part.stats["responses"] for part in kept)


SPEC = StageSpec(
    STAGE,
    generate_batch,
    config="generators",
    endpoints=lambda gens: [g.endpoint for g in gens],
    key_reads=_what_generation_reads,
    llm=True,
    answers=True,
    at=Position.ANSWERS,
    on_batch=answer_batch,
    recorded=count_answers,
    check=check_generation,
)


def assumed_answer(max_tokens: int) -> str:
    """A stand-in answer of about ``max_tokens`` tokens (at 3 bytes a token), for planning the stages
    after generation before any answer exists."""
    return " ".join(["word"] * max(max_tokens * 3 // 5, 1))
