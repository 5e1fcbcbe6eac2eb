"""Harness protocols (``rmb evaluate --protocol NAME``): how a named harness prepares a text for a reward model.

Each protocol is one harness's settings, read from its code (the file and commit it copies are in ``source``):
the maximum length and which side is cut, whether the tokenizer adds its special tokens (a BOS) to the
chat-templated text and whether a doubled BOS's first copy is masked, how turns get their roles, the dtype
it loads a model in on a GPU, and what a pairwise tie counts. ``native`` is rmb's own: the model's own limit,
cut from the left, the template's tokens only, roles as given.

Only ``hf:`` reward models read tokens; for the other kinds a protocol sets the tie rule alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from rmb_build.core.errors import RMBError

RMB_SOURCE = "Zhou-Zoey/RMB-Reward-Model-Benchmark@2be3180857f2190b7ffa929d43190835627f1f4d:eval/scripts/my_run_rm.py"
RB_REPO = "allenai/reward-bench@05a9005efb607249822c193590c8ecab87c77052"
RMBENCH_SOURCE = "THU-KEG/RM-Bench@73c52d7b27b361621361ec959ac6c0eb9bb7a689:scripts/run_rm.py"
JUDGEBENCH_SOURCE = "ScalerLab/JudgeBench@e2c52c284e735e139b3daa61c206ee208f36c461:utils/judges.py"


@dataclass(frozen=True)
class Protocol:
    name: str
    harness: str  # one line: whose harness, and what it does
    source: str  # repository@commit:file it is read from ("" for native)
    max_length: int | None  # tokens per text; None: see ``limit``
    limit: str  # "fixed": max_length | "model": the model's own limit | "none": never cut
    truncation_side: str  # "left" | "right" | "tokenizer" (the tokenizer's own truncation_side)
    special_tokens: bool  # the tokenizer adds its special tokens (a BOS) to the chat-templated text
    double_bos: str  # "keep" | "mask": a text starting with two BOS has the first one's attention masked
    roles: str  # "given" | "alternate": turn i is user when i is even, assistant when odd (the role field unread)
    gpu_dtype: str | None  # the dtype the harness loads a model in on a GPU (None: rmb's auto, bf16)
    ties: str  # "strict" | "half": what a pairwise tie counts by default
    # The harness's padding side: "left" | "right" | "tokenizer" (the tokenizer's own padding_side). rmb pads
    # right whatever the harness does; a harness that pads left and gives no position ids shifts each text's
    # positions by its batch's padding (see ``LEFT_PADDING``).
    harness_padding: str = "tokenizer"

    def settings(self) -> dict[str, Any]:
        """What changes a text's tokens: part of the score cache's key."""
        return {
            "max_length": self.max_length,
            "limit": self.limit,
            "truncation_side": self.truncation_side,
            "special_tokens": self.special_tokens,
            "double_bos": self.double_bos,
            "roles": self.roles,
        }

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, **self.settings(), "dtype_on_gpu": self.gpu_dtype, "ties": self.ties,
                "harness": self.harness, "source": self.source}  # fmt: skip


# What a harness that pads on the left without position ids does to a model that reads absolute positions.
LEFT_PADDING = (
    "the harness pads on the left and gives no position ids, so a model with learned absolute positions "
    "(GPT-2, GPT-Neo, GPT-BigCode) reads each text at positions shifted by its batch's padding: the harness's "
    "scores for such a model depend on the batch and its size; rmb pads right, so its scores are the "
    "harness's at batch size 1 (a rotary or relative-position model is moved by rounding only)"
)


class _Shared(TypedDict):
    """The settings several protocols share, passed as ``Protocol(..., **shared)``."""

    special_tokens: bool
    double_bos: str
    roles: str
    gpu_dtype: str | None
    ties: str


# reward-bench's pipeline (rewardbench/models/pipeline.py, RewardBenchPipeline) tokenizes the templated text
# with the tokenizer's own special tokens and masks the first of two leading BOS; RMB's copy is the same.
_PIPELINE: _Shared = {
    "special_tokens": True,
    "double_bos": "mask",
    "roles": "alternate",
    "gpu_dtype": "fp16",
    "ties": "strict",
}

PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(
            "native",
            "rmb's own: the model's own limit, cut from the left; the chat template's tokens only",
            "",
            None,
            "model",
            "left",
            special_tokens=False,
            double_bos="keep",
            roles="given",
            gpu_dtype=None,
            ties="strict",
        ),
        Protocol(
            "rmb",
            "RMB's eval/scripts/my_run_rm.py for a sequence classifier: --max_length 2048, truncation_side left",
            RMB_SOURCE,
            2048,
            "fixed",
            "left",
            **_PIPELINE,
        ),
        Protocol(
            "rewardbench",
            "the rewardbench CLI (rewardbench/rewardbench.py, package 0.1.4): no truncation, left padding",
            f"{RB_REPO}:rewardbench/rewardbench.py",
            None,
            "none",
            "left",
            harness_padding="left",
            **_PIPELINE,
        ),
        Protocol(
            "rewardbench-run_rm",
            "reward-bench's scripts/run_rm.py (RewardBench's leaderboard): --max_length 2048, truncation_side left",
            f"{RB_REPO}:scripts/run_rm.py",
            2048,
            "fixed",
            "left",
            **_PIPELINE,
        ),
        Protocol(
            "rewardbench-v2",
            "reward-bench's scripts/run_v2.py (RewardBench 2): --max_length 2048, cut on the tokenizer's own side",
            f"{RB_REPO}:scripts/run_v2.py",
            2048,
            "fixed",
            "tokenizer",
            **_PIPELINE,
        ),
        Protocol(
            "rm-bench",
            "RM-Bench's scripts/run_rm.py (reward-bench's run_rm.py): --max_length 2048, truncation_side left",
            RMBENCH_SOURCE,
            2048,
            "fixed",
            "left",
            **_PIPELINE,
        ),
        # JudgeBench's reward-model judges differ (GRMReward pads to and cuts at the model's limit, fp16;
        # InternLM2Reward calls the model's own get_score); this is SkyworkReward, its README's example.
        Protocol(
            "judgebench",
            "JudgeBench's run_judge.py --judge_name reward_model --single_game (utils/judges.py SkyworkReward): "
            "[user question, assistant response] chat-templated, then tokenized with the tokenizer's own "
            "special tokens, no cut, bf16",
            JUDGEBENCH_SOURCE,
            None,
            "none",
            "left",
            special_tokens=True,
            double_bos="keep",
            roles="given",
            gpu_dtype="bf16",
            ties="strict",
        ),
    )
}


def protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise RMBError(f"--protocol {name!r}: unknown protocol (known: {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]


def default_for(release_format: str | None) -> str:
    """The authors' protocol of a release format: ``rmb``'s own for RMB's layout, a benchmark format's
    registry entry's ``protocol``; ``native`` for anything else."""
    from rmb_build.benchmarks import BENCHMARK_FORMATS
    from rmb_build.benchmarks.formats import RMB

    if release_format == RMB:
        return "rmb"
    entry = None
    if release_format is not None and release_format in BENCHMARK_FORMATS:
        entry = BENCHMARK_FORMATS.get(release_format)
    return entry.protocol if entry is not None and entry.protocol is not None else "native"


def ties_phrase(ties: str, rec: dict[str, Any]) -> str:
    """The headline's tie rule: ``ties half``, and where ``--ties`` replaced the protocol's, which it replaced."""
    return f"ties {ties}" + (f" (--ties, over the protocol's {rec['ties']})" if ties != rec.get("ties", ties) else "")


# The settings a protocol names that only an RM reading tokens (hf:) takes; another kind prepares its texts its
# own way, and its record says so (None) rather than claim them.
TOKEN_SETTINGS = ("limit", "special_tokens", "double_bos", "roles", "dtype_on_gpu")


def record(
    p: Protocol,
    *,
    max_length: int | None,
    truncation_side: str | None,
    overridden: list[str],
    applies: bool,
    padding: str | None = None,
    harness_padding: str | None = None,
) -> dict:
    """results.json's ``protocol``: the named settings and what this run resolved them to. ``padding``: how rmb
    batched the texts (``right``; ``none`` where each text runs alone); ``harness_padding``: the harness's side,
    resolved (its tokenizer's own where the harness leaves it)."""
    out = {**p.to_json(), "max_length": max_length, "truncation_side": truncation_side, "padding": padding}
    if p.limit == "model":
        out["note"] = "native: the model's own limit, whatever a harness would cut"
    if p.name != "native" and applies:
        out["harness_padding"] = harness_padding or p.harness_padding
        if out["harness_padding"] == "left" and padding != "left":
            out["batch_dependence"] = LEFT_PADDING
    if overridden:
        out["overridden"] = overridden
    if not applies:
        out.update({k: None for k in TOKEN_SETTINGS})
        out["applies_to"] = "the tie rule only: this kind of RM prepares its texts its own way"
    return out


def label(rec: dict[str, Any]) -> str:
    """One phrase for a printed headline: ``protocol rmb (2048 tokens, cut left)``."""
    if rec.get("applies_to"):  # the protocol's tie rule is its only setting this RM reads (``--ties`` may replace it)
        return f"protocol {rec['name']} (sets only the tie rule for this RM)"
    if rec["max_length"] is None:
        length = "no cut" if rec["limit"] == "none" else "the model's own limit (none known), no cut"
    elif rec["limit"] == "model" and not rec.get("overridden"):
        length = f"the model's own limit, {rec['max_length']} tokens, cut {rec['truncation_side']}"
    else:
        length = f"{rec['max_length']} tokens, cut {rec['truncation_side']}"
    extra = " overriding " + ", ".join(rec["overridden"]) if rec.get("overridden") else ""
    return f"protocol {rec['name']} ({length}{extra})"
