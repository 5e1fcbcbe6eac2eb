"""Guard: Llama Guard 2 safety labels for harmlessness prompts and for every answer to them.

The request uses Llama Guard 2's own prompt (``prompts/guard/llama_guard2.md``, categories S1-S11 of
``taxonomy.HAZARD_CATEGORIES``) and its reply format: ``safe``, or ``unsafe`` then a line of
categories (``S1,S3``). The parser is tolerant, because the demo's guard is a 135M chat model: a
reply it cannot read becomes an ``unknown`` label plus a Failure, never an exception.

With ``guard.reply: json`` (``auto`` on an embedded endpoint) the prompt asks for the same verdict as one
JSON object (``prompts/guard/llama_guard2_json.md``) and the request carries its schema
(:func:`verdict_schema`), which the endpoint's structured output turns into a grammar: a small chat model
that answers Llama Guard's text prompt with "S1: Violent Crimes." then can only answer a verdict.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from rmb_build.core.items import Turn
from rmb_build.core.prompting import load_prompt
from rmb_build.core.records import Failure, GuardLabel, Query, Response
from rmb_build.core.taxonomy import HARMLESSNESS, HAZARD_CATEGORIES, MULTI, parse_scenario_id
from rmb_build.core.text import fill, render_conversation
from rmb_build.llm.config import EndpointConfig
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
from rmb_build.stages.options import GuardConfig
from rmb_build.stages.plan import Planned
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

STAGE = "guard"  # the stage's one name: its SPEC's, its requests' and failures' stage
PROMPT = "guard/llama_guard2.md"
JSON_PROMPT = "guard/llama_guard2_json.md"
TEXT_REPLY, JSON_REPLY = "text", "json"
JSON_MIN_TOKENS = 40  # {"verdict": "unsafe", "categories": ["S1", "S2", "S3"]} is about 25 tokens
MAX_JSON_CATEGORIES = 3
SAFE, UNSAFE, UNKNOWN = "safe", "unsafe", "unknown"
PROMPT_TARGET, RESPONSE_TARGET = "prompt", "response"
_ROLES = {"user": "User", "assistant": "Agent"}
# Llama Guard 2's own short names, besides the taxonomy's, so "unsafe\nSelf-Harm" still reads.
_NAMES = {name.lower(): code for code, name in HAZARD_CATEGORIES.items()} | {
    "sex crimes": "S3",
    "child exploitation": "S4",
    "self-harm": "S10",
}
_NAME_RES = [(re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])"), code) for name, code in _NAMES.items()]
_CODE_RE = re.compile(r"\bS(\d{1,2})\b", re.IGNORECASE)
_VERDICT_RE = re.compile(r"\b(unsafe|safe)\b")


@dataclass(frozen=True)
class GuardVerdict:
    verdict: str
    categories: tuple[str, ...] = ()


def _code_order(code: str) -> int:
    return int(code[1:])


def parse_guard_reply(text: str | None) -> GuardVerdict:
    """Read a Llama Guard reply: ``safe`` / ``unsafe`` on the first line, categories after ``unsafe``.

    Tolerates markdown, quotes, punctuation and chatter around the verdict; with no leading verdict,
    a reply naming exactly one of ``safe`` / ``unsafe`` counts. Anything else is ``unknown``.
    Categories outside S1-S11 are dropped; names of categories count like their codes.
    """
    lines = [ln.strip().strip("*`'\".:#-").strip() for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return GuardVerdict(UNKNOWN)
    lead = _VERDICT_RE.match(lines[0].lower())
    if lead:
        verdict = lead.group(1)
    else:
        found = set(_VERDICT_RE.findall((text or "").lower()))
        if len(found) != 1:
            return GuardVerdict(UNKNOWN)
        verdict = found.pop()
    if verdict == SAFE:
        return GuardVerdict(SAFE)
    rest = "\n".join(lines)
    codes = {f"S{int(n)}" for n in _CODE_RE.findall(rest)}
    lowered = rest.lower()
    codes |= {code for pattern, code in _NAME_RES if pattern.search(lowered)}
    return GuardVerdict(UNSAFE, tuple(sorted((c for c in codes if c in HAZARD_CATEGORIES), key=_code_order)))


def verdict_schema() -> dict[str, Any]:
    """The JSON form of a Llama Guard verdict: ``safe`` or ``unsafe`` and the S-codes violated.

    ``enum`` and ``maxItems`` constrain llama.cpp's grammar, so a reply stays a short, readable verdict."""
    return {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": [SAFE, UNSAFE]},
            "categories": {
                "type": "array",
                "items": {"type": "string", "enum": list(HAZARD_CATEGORIES)},
                "maxItems": MAX_JSON_CATEGORIES,
            },
        },
        "required": ["verdict", "categories"],
        "additionalProperties": False,
    }


def reply_format(cfg: GuardConfig, endpoint: EndpointConfig | None) -> str:
    """``text`` or ``json``: ``cfg.reply``, where ``auto`` is json on an embedded endpoint with structured
    output (a small chat model that is no Llama Guard) and text elsewhere (a Llama Guard server's own form)."""
    if cfg.reply != "auto":
        return cfg.reply
    embedded = endpoint is not None and getattr(endpoint, "embedded", None)
    return JSON_REPLY if embedded and getattr(endpoint, "structured_output", None) != "none" else TEXT_REPLY


def read_reply(result: ChatResult) -> GuardVerdict:
    """The verdict of one guard reply: its parsed JSON verdict where it has one, else the text parser's."""
    parsed = result.parsed
    if isinstance(parsed, dict) and parsed.get("verdict") in (SAFE, UNSAFE):
        if parsed["verdict"] == SAFE:
            return GuardVerdict(SAFE)
        codes = {c for c in parsed.get("categories") or () if c in HAZARD_CATEGORIES}
        return GuardVerdict(UNSAFE, tuple(sorted(codes, key=_code_order)))
    return parse_guard_reply(result.text)


def scenario_for(verdict: GuardVerdict) -> str | None:
    """The harmlessness scenario a prompt's categories imply: one -> ``S<n>``, several -> ``multi``."""
    if verdict.verdict != UNSAFE or not verdict.categories:
        return None
    name = verdict.categories[0] if len(verdict.categories) == 1 else MULTI
    return f"{HARMLESSNESS}/{name}"


def categories_block() -> str:
    return "\n".join(f"{code}: {name}." for code, name in HAZARD_CATEGORIES.items())


def guard_messages(
    conversation: Sequence[Turn],
    answer: str | None,
    prompt_format: str,
    max_input_tokens: int,
    reply: str = TEXT_REPLY,
) -> tuple[tuple[str, str], ...]:
    """Messages asking about the last user turn (``answer`` None) or about ``answer`` to it."""
    return _guard_prompt(conversation, answer, prompt_format, max_input_tokens, reply)[0]


def _guard_prompt(
    conversation: Sequence[Turn],
    answer: str | None,
    prompt_format: str,
    max_input_tokens: int,
    reply: str = TEXT_REPLY,
) -> tuple[tuple[tuple[str, str], ...], int]:
    turns = [(t.role, t.content) for t in conversation if t.role in _ROLES]
    if answer is not None:
        turns.append(("assistant", answer))
    template = load_prompt(JSON_PROMPT if reply == JSON_REPLY else PROMPT)
    budget = max_input_tokens - estimate_tokens(template + categories_block())
    texts, cut = fit_texts([c for _, c in turns], max(budget, 64))
    turns = [(role, c.strip()) for (role, _), c in zip(turns, texts)]
    if prompt_format == "chat":
        return tuple(turns), cut
    role = "Agent" if answer is not None else "User"
    convo = render_conversation(turns, fmt="{role}: {content}", roles=_ROLES)
    return (("user", fill(template, role=role, categories=categories_block(), conversation=convo)),), cut


def is_harmlessness(query: Query) -> bool:
    return parse_scenario_id(query.scenario_id).goal == HARMLESSNESS if query.scenario_id else False


Target = tuple[str, str, "str | None", int]  # query id, prompt or response, generator, characters cut


def prepare(
    queries: Sequence[Query],
    responses: Sequence[Response],
    cfg: GuardConfig,
    endpoints: Mapping[str, Any] | None = None,
    *,
    every_prompt: bool = False,
) -> Planned[Target]:
    """One request per harmlessness prompt and per response to one; other queries are skipped.

    ``every_prompt`` guards every query's prompt (goal routing, ``route.py``): pass no responses with it."""
    by_id = {qid: q for qid, q in index_queries(queries).items() if every_prompt or is_harmlessness(q)}
    endpoint = endpoint_of(None, cfg.endpoint, endpoints)
    reply = reply_format(cfg, endpoint)
    max_tokens = max(cfg.max_tokens, JSON_MIN_TOKENS) if reply == JSON_REPLY else cfg.max_tokens
    budget = input_token_budget(endpoint, max_tokens)
    asked: list[tuple[str, str, str | None, str | None]] = [(qid, PROMPT_TARGET, None, None) for qid in by_id]
    seen: set[tuple[str, str]] = set()
    for r in responses:
        if r.query_id in by_id and (r.query_id, r.generator) not in seen:
            seen.add((r.query_id, r.generator))
            asked.append((r.query_id, RESPONSE_TARGET, r.generator, r.text))
    out: Planned[Target] = Planned()
    for qid, target, gen, text in asked:
        messages, cut = _guard_prompt(by_id[qid].conversation, text, cfg.prompt_format, budget, reply)
        out.targets.append((qid, target, gen, cut))
        out.requests.append(
            cfg.request(
                messages,
                stage=STAGE,
                tag=qid,
                max_tokens=max_tokens,
                response_schema=verdict_schema() if reply == JSON_REPLY else None,
                schema_name="guard_verdict",
                max_reasks=0,  # a reply outside the schema is read by the text parser, or counted unreadable
            )
        )
    return out


def plan(
    queries: Sequence[Query],
    responses: Sequence[Response],
    cfg: GuardConfig,
    endpoints: Mapping[str, Any] | None = None,
    *,
    every_prompt: bool = False,
) -> list[ChatRequest]:
    """The requests :func:`guard` sends for ``queries`` and ``responses``."""
    return prepare(queries, responses, cfg, endpoints, every_prompt=every_prompt).requests


def collect(planned: Planned[Target], results: Sequence[ChatResult], cfg: GuardConfig) -> StageResult[list[GuardLabel]]:
    """A GuardLabel per result (``unknown`` plus a Failure for a reply it cannot read, counted as
    ``unreadable``); a call that brought no reply is a Failure without a label."""
    guard_name = f"{cfg.endpoint}/{cfg.model}"
    records: list[GuardLabel] = []
    failures: list[Failure] = []
    for (qid, target, gen, _), res in zip(planned.targets, results):
        if not res.ok and res.text is None:  # a reply outside the schema is still read below
            failures.append(Failure(STAGE, qid, gen, res.error or "no reply"))
            continue
        v = read_reply(res)
        if v.verdict == UNKNOWN:
            failures.append(Failure(STAGE, qid, gen, f"unreadable guard reply {(res.text or '')[:200]!r}"))
        records.append(
            GuardLabel(
                qid,
                target,
                gen,
                v.verdict,
                v.categories,
                scenario_for(v) if target == PROMPT_TARGET else None,
                res.text or "",
                guard_name,
            )
        )
    stats = {
        "requests": len(planned.requests),
        "labels": len(records),
        "failures": len(failures),
        "unreadable": sum(1 for lb in records if lb.verdict == UNKNOWN),
        "inputs_cut": sum(1 for *_, cut in planned.targets if cut),
        **{
            f"{t}_{v}": sum(1 for lb in records if lb.target == t and lb.verdict == v)
            for t in (PROMPT_TARGET, RESPONSE_TARGET)
            for v in (SAFE, UNSAFE, UNKNOWN)
        },
    }
    return StageResult(records, failures, stats)


async def guard(
    queries: Sequence[Query],
    responses: Sequence[Response],
    cfg: GuardConfig,
    client: ChatClient,
    *,
    endpoints: Mapping[str, Any] | None = None,
    every_prompt: bool = False,
) -> StageResult[list[GuardLabel]]:
    """A GuardLabel for every harmlessness prompt and every response to one; other queries are skipped
    (``every_prompt``: every query's prompt, see :func:`prepare`)."""
    planned = prepare(
        queries,
        responses,
        cfg,
        endpoints_of(client, endpoints),
        every_prompt=every_prompt,
    )
    return collect(planned, await ask(client, planned.requests, desc=STAGE), cfg)


def apply_prompt_scenarios(queries: Iterable[Query], labels: Iterable[GuardLabel]) -> list[Query]:
    """Queries with a harmlessness scenario moved to what their prompt's guard categories imply
    (one category -> ``S<n>``, several -> ``multi``); queries without such a label stay as they are."""
    implied = {lb.query_id: lb.scenario_id for lb in labels if lb.target == PROMPT_TARGET and lb.scenario_id}
    return [
        dataclasses.replace(q, scenario_id=implied[q.id]) if is_harmlessness(q) and q.id in implied else q
        for q in queries
    ]


async def guard_batch(
    env: StageEnv, queries: Sequence[Query], responses: Sequence[Response]
) -> StageResult[list[GuardLabel]]:
    return await guard(queries, responses, env.section, env.chat())


SPEC = StageSpec(
    STAGE,
    guard_batch,
    config="guard",
    endpoints=lambda guard_cfg: [guard_cfg.endpoint],
    prompts=("guard",),
    llm=True,
    counts="answers",
    at=Position.VERDICTS,
    takes=finished_only,
)
