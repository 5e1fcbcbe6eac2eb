"""``openai:<model>[@<endpoint name | base URL>]``: a generative RM (LLM-as-judge) on any OpenAI-compatible
endpoint, through ``rmb_build.llm.LLMClient`` (cached, concurrent, retried).

The two factors the RMB paper studied are options: ``--judge-mode pairwise`` (which of two answers
is better, each pair asked in both orders so position bias shows) or ``pointwise`` (a 1-10 score per
answer), and ``--with-criteria`` (the scenario's evaluation criteria in the prompt). ``--votes k``
asks k samples of every judgement: pairwise votes are counted, pointwise scores averaged.
Without ``@``, the endpoint is $OPENAI_BASE_URL (else OpenAI's API); keys come from $OPENAI_API_KEY.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.prompting import criteria_for, load_prompt, prompt_hash
from rmb_build.core.text import fill, render_conversation
from rmb_build.evaluate.adapters import ADAPTERS, JudgePair, PairJudge, RewardModel, ScoreText
from rmb_build.llm.structured import score_reply_schema

if TYPE_CHECKING:
    from rmb_build.llm.config import EndpointConfig

ENDPOINT = "rm"  # the name this adapter gives a URL-only endpoint
PROMPTS = {"pairwise": "rm_judge/pairwise.md", "pointwise": "rm_judge/pointwise.md"}
SYSTEM, CRITERIA = "rm_judge/system.md", "rm_judge/criteria.md"
PAIRWISE_SCHEMA = {
    "type": "object",
    "properties": {"rationale": {"type": "string"}, "winner": {"type": "string", "enum": ["A", "B"]}},
    "required": ["rationale", "winner"],
}
POINTWISE_SCHEMA = score_reply_schema()  # the build's judge's reply: llama.cpp's grammar honours its enum
CHUNK = 32  # units per client call: progress and cache commits happen at least this often


def resolve_endpoint(
    where: str | None, endpoints: Mapping[str, EndpointConfig] | None, structured_output: str = "json_schema"
) -> tuple[str, dict[str, EndpointConfig]]:
    """(endpoint name, {name: EndpointConfig}) for ``@<where>``: a base URL or one of ``endpoints`` (``--config``'s)."""
    from pydantic import ValidationError

    from rmb_build.llm.config import EndpointConfig

    if where is None or where.startswith(("http://", "https://")):
        url = where or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        try:
            return ENDPOINT, {
                ENDPOINT: EndpointConfig.model_validate(
                    {"base_url": url, "api_key_env": "OPENAI_API_KEY", "structured_output": structured_output}
                )
            }
        except ValidationError as exc:
            # Not the URL itself: one that does not parse may not show where its password ends.
            raise RMBError(f"--rm openai:…@<URL>: not a usable endpoint URL ({exc.errors()[0]['msg']})") from None
    if endpoints is None:
        raise RMBError(f"--rm openai:…@{where}: {where!r} is not a URL; to name an endpoint, give --config")
    if where not in endpoints:
        raise RMBError(
            f"--rm openai:…@{where}: no endpoint {where!r} in --config (defined: {', '.join(endpoints) or 'none'})"
        )
    return where, dict(endpoints)


class GenerativeRM(PairJudge):
    """A judge in pairwise mode; a text scorer (``per_scenario`` with criteria) in pointwise mode."""

    kind = "openai"

    def __init__(self, target, options):
        RewardModel.__init__(self, target, options)
        model, sep, where = target.partition("@")
        if not model or (sep and not where):
            raise RMBError(f"--rm openai:{target}: expected openai:<model>[@<endpoint name or base URL>]")
        if options.judge_mode not in PROMPTS:
            raise RMBError(f"--judge-mode {options.judge_mode!r}: expected pairwise or pointwise")
        self.model = model
        self.endpoint, self.endpoints = resolve_endpoint(where or None, options.endpoints, options.structured_output)
        self.compares_pairs = options.judge_mode == "pairwise"
        self.per_scenario = options.with_criteria
        self.votes = max(1, options.votes)
        self.client = None
        self.stats = {"failed_judgements": 0}

    def ask_as(self, name: str) -> None:
        """Name this RM's endpoint ``name`` in its requests: a client holding several RMs' endpoints needs
        each under a name of its own (the name is in no cache key)."""
        self.endpoint, self.endpoints = name, {name: self.endpoints[self.endpoint]}

    def describe(self) -> dict:
        from rmb_build.llm import endpoint_identity

        prompts = [SYSTEM, PROMPTS[self.options.judge_mode]] + ([CRITERIA] if self.per_scenario else [])
        return {
            "model": self.model,
            "endpoint": endpoint_identity(self.endpoints[self.endpoint]),
            "judge_mode": self.options.judge_mode,
            "votes": self.votes,
            "with_criteria": self.per_scenario,
            "structured_output": self.endpoints[self.endpoint].structured_output,
            "temperature": self._temperature(),
            "prompts": {p: prompt_hash(p) for p in prompts},
        }

    def _temperature(self) -> float:
        return 0.0 if self.votes == 1 else 0.7  # several votes of a greedy judge would all agree

    def _client(self):
        if self.client is None:
            from rmb_build.evaluate.cache import default_cache_dir
            from rmb_build.llm import LLMClient

            cache_dir = self.options.llm_cache_dir or str(default_cache_dir() / "llm")
            self.client = LLMClient(self.endpoints, cache_dir, progress=False)
        return self.client

    def _criteria(self, scenario_id: str | None) -> str:
        if not self.per_scenario or scenario_id is None:
            return ""
        try:
            return fill(load_prompt(CRITERIA), criteria=criteria_for(scenario_id).strip())
        except FileNotFoundError as exc:
            raise RMBError(f"--with-criteria: {exc}") from None

    def _requests(self, user_prompt: str, schema: dict, tag: str):
        from rmb_build.llm import ChatRequest

        messages = (("system", load_prompt(SYSTEM).strip()), ("user", user_prompt))
        return [
            ChatRequest(
                self.endpoint,
                self.model,
                messages,
                temperature=self._temperature(),
                max_tokens=384,
                sample_index=j,
                response_schema=schema,
                schema_name="verdict",
                stage="evaluate",
                tag=tag,
            )
            for j in range(self.votes)
        ]

    def _ask_chunks(self, units: Sequence[Any], build) -> Iterator[tuple[list[int], list[list[Any]]]]:
        """Ask ``build(unit)``'s requests for CHUNK units at a time; yields (indices, each unit's results)."""
        for start in range(0, len(units), CHUNK):
            idx = list(range(start, min(start + CHUNK, len(units))))
            per_unit = [build(units[i]) for i in idx]
            results = self._client().run(
                [r for reqs in per_unit for r in reqs], desc=f"openai:{self.model}", progress=False
            )
            self.stats["failed_judgements"] += sum(not r.ok for r in results)
            grouped, pos = [], 0
            for reqs in per_unit:
                grouped.append(results[pos : pos + len(reqs)])
                pos += len(reqs)
            yield idx, grouped

    def cacheable(self, value: object) -> bool:
        """Judgements with a failed sample are used in this run but asked again by the next one."""
        if isinstance(value, dict):
            return all(v is not None for votes in value.values() for v in votes)
        return value is not None

    # ---- pairwise: both orders, k votes each -------------------------------------------------------

    def judge_stream(self, pairs: Sequence[JudgePair]) -> Iterator[tuple[list[int], list[dict]]]:
        template = load_prompt(PROMPTS["pairwise"])

        def build(p: JudgePair):
            base = dict(criteria=self._criteria(p.scenario_id), conversation=render_conversation(p.conversation))
            return self._requests(
                fill(template, **base, answer_a=p.first, answer_b=p.second), PAIRWISE_SCHEMA, f"{p.key[:12]}:ab"
            ) + self._requests(
                fill(template, **base, answer_a=p.second, answer_b=p.first), PAIRWISE_SCHEMA, f"{p.key[:12]}:ba"
            )

        for idx, grouped in self._ask_chunks(pairs, build):
            votes = []
            for results in grouped:
                verdicts = [(1 if r.parsed["winner"] == "A" else 0) if r.ok and r.parsed else None for r in results]
                votes.append({"ab": verdicts[: self.votes], "ba": verdicts[self.votes :]})
            yield idx, votes

    # ---- pointwise: a 1-10 score per answer, averaged over k votes ---------------------------------

    def score_stream(self, texts: Sequence[ScoreText]) -> Iterator[tuple[list[int], list[float | None]]]:
        template = load_prompt(PROMPTS["pointwise"])

        def build(t: ScoreText):
            prompt = fill(
                template,
                criteria=self._criteria(t.scenario_id),
                conversation=render_conversation(t.conversation),
                answer=t.answer,
            )
            return self._requests(prompt, POINTWISE_SCHEMA, t.key[:12])

        for idx, grouped in self._ask_chunks(texts, build):
            scores: list[float | None] = []
            for results in grouped:
                got = [float(r.parsed["score"]) for r in results if r.ok and r.parsed]
                # All k votes or none: a mean over fewer would be cached as if it were the full one.
                scores.append(sum(got) / len(got) if len(got) == self.votes else None)
            yield idx, scores

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


ADAPTERS.add(GenerativeRM.kind, GenerativeRM)
