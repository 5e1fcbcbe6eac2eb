"""The known-models table (``known_models.yaml``): how each well-known reward model loads here, and where
each of those claims comes from.

``hf:<hub id>`` looks its id up; a row fills every option the command line left at its default
(``--family`` and the others override it) and is recorded in results.json with its check status. A model
not in the table loads as a plain sequence classifier, with the head check. ``$RMB_KNOWN_MODELS`` names a
YAML file of further rows (the same fields; a row with a listed id replaces it).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.hub import is_hub_id
from rmb_build.core.paths import safe_name, user_cache_dir
from rmb_build.core.yaml_file import parse_yaml

if TYPE_CHECKING:
    from rmb_build.evaluate.rm_options import RMOptions

TABLE = "known_models.yaml"
ENV = "RMB_KNOWN_MODELS"
# The claims a row makes; each one it makes needs a source (or is listed under `unsourced`).
CLAIMS = ("family", "dtype", "attn", "max_length", "remote_code", "system", "template", "source")
# What a row's source may name besides a URL.
REFS = {
    "card": "the row's model card (its `card` URL)",
    "rb-config": "https://github.com/allenai/reward-bench/blob/main/scripts/configs/eval_configs.yaml",
    "rb-models": "https://github.com/allenai/reward-bench/blob/main/rewardbench/models/__init__.py",
    "rb-generative": "https://github.com/allenai/reward-bench/blob/main/rewardbench/generative.py",
    "rb-table": "https://huggingface.co/spaces/allenai/reward-bench (RewardBench)",
    "rb2-table": "https://huggingface.co/spaces/allenai/reward-bench (RewardBench 2)",
    "rmb-paper": "https://arxiv.org/abs/2410.09893 (RMB's leaderboard)",
    "rmb-script": "https://github.com/Zhou-Zoey/RMB-Reward-Model-Benchmark/blob/main/eval/scripts/shell/run_rm.sh",
    "worldpm-readme": "https://github.com/QwenLM/WorldPM/blob/main/README.md",
}
KINDS = ("hf", "openai")
DTYPES = ("bf16", "fp32")


@dataclass(frozen=True)
class Example:
    """A card's own example: one conversation, its responses and the scores the card prints for them."""

    conversation: tuple[dict[str, str], ...]
    responses: tuple[str, ...]
    scores: tuple[float, ...]
    tolerance: float  # the largest |computed - published| that counts as reproduced
    source: str

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation": [dict(t) for t in self.conversation],
            "responses": list(self.responses),
            "scores": list(self.scores),
            "tolerance": self.tolerance,
            "source": self.source,
        }


@dataclass(frozen=True)
class KnownModel:
    id: str
    family: str | None = None  # None: the loading rule is not sourced; --family must say it
    rm: str = "hf"  # the --rm kind that runs it (openai: a generative judge with the pairwise prompt)
    dtype: str | None = None
    attn: str | None = None
    max_length: int | None = None
    remote_code: bool = False
    system: str | None = None  # a system turn put before every conversation that has none
    template: str | None = None  # chat-template notes
    source: str = ""  # where it is ranked: RMB, RB, RB2, RMB-script
    card: str = ""
    sources: dict[str, str] = field(default_factory=dict)  # claim -> a REFS key or URL
    unsourced: tuple[str, ...] = ()  # claims kept from the earlier table, not traced to a source
    notes: str = ""
    example: Example | None = None
    check: dict[str, Any] | None = None  # filled per evaluation (check_status), never in the table

    def settings(self) -> dict[str, Any]:
        """What changes scores (the score cache's fingerprint holds only these)."""
        keep = ("id", "family", "rm", "dtype", "attn", "max_length", "remote_code", "system")
        return {k: getattr(self, k) for k in keep if getattr(self, k) not in (None, "", False)}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value in (None, "", False, (), {}) or (f.name == "rm" and value == "hf"):
                continue
            out[f.name] = (
                value.to_json() if isinstance(value, Example) else list(value) if f.name == "unsourced" else value
            )
        return out


def _row(raw: object, where: str, index: int) -> KnownModel:
    """One table row, checked: an unknown key, a wrong type or a claim without a source names the row."""

    def bad(name: str | None, message: str) -> InputError:
        item = f"{index} ({raw.get('id')})" if isinstance(raw, dict) and raw.get("id") else index
        return InputError(where, message, item=item, field=name)

    if not isinstance(raw, dict):
        raise bad(None, f"a row is a mapping, not {type(raw).__name__}")
    names = {f.name for f in dataclasses.fields(KnownModel)} - {"check"}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise bad(unknown[0], f"unknown key (known: {', '.join(sorted(names))})")
    model_id = raw.get("id")
    if not isinstance(model_id, str) or not (
        is_hub_id(model_id, org=False)
        if raw.get("rm", "hf") == "hf"
        else model_id and model_id.count("/") <= 1  # an API's own model name: 'ft:gpt-4o-mini:acme::x1'
    ):
        raise bad("id", "a Hub id (org/name) or an API model name is required")
    kinds = {
        "family": str,
        "rm": str,
        "dtype": str,
        "attn": str,
        "max_length": int,
        "remote_code": bool,
        "system": str,
        "template": str,
        "source": str,
        "card": str,
        "notes": str,
        "sources": dict,
        "unsourced": list,
        "example": dict,
    }
    for name, kind in kinds.items():
        value = raw.get(name)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise bad(name, f"must be {kind.__name__}, not {type(value).__name__}")
    if raw.get("rm", "hf") not in KINDS:
        raise bad("rm", f"must be one of {', '.join(KINDS)}")
    if raw.get("dtype") is not None and raw["dtype"] not in DTYPES:
        raise bad("dtype", f"must be one of {', '.join(DTYPES)}")
    if raw.get("max_length") is not None and raw["max_length"] <= 0:
        raise bad("max_length", "must be a positive number of tokens")
    sources = raw.get("sources") or {}
    unsourced = raw.get("unsourced") or []
    for claim, ref in sources.items():
        if claim not in CLAIMS and claim != "example":
            raise bad("sources", f"{claim!r} is not a claim a row makes ({', '.join(CLAIMS)})")
        if not isinstance(ref, str) or not any(
            part.strip() in REFS or part.strip().startswith("https://") for part in ref.split(";")
        ):
            raise bad("sources", f"{claim}: {ref!r} names no known reference ({', '.join(REFS)}) or https URL")
    both = [c for c in unsourced if c in sources]
    if both:
        raise bad("unsourced", f"{both[0]!r} is listed under `sources` too: a claim is sourced or it is not")
    for claim in CLAIMS:
        if raw.get(claim) not in (None, "", False) and claim not in sources and claim not in unsourced:
            raise bad(claim, "the claim has no source (add it to `sources`, or list it under `unsourced`)")
    example = _example(raw["example"], bad) if raw.get("example") is not None else None
    values = {k: v for k, v in raw.items() if k not in ("example", "unsourced")}
    return KnownModel(**values, unsourced=tuple(unsourced), example=example)


def _example(raw: dict, bad) -> Example:
    known = {"conversation", "responses", "scores", "tolerance", "source"}
    unknown = sorted(set(raw) - known)
    if unknown or not known <= set(raw):
        raise bad("example", f"an example has exactly the keys {', '.join(sorted(known))}")
    conv = raw["conversation"]
    if (
        not isinstance(conv, list)
        or not conv
        or not all(
            isinstance(t, dict) and set(t) == {"role", "content"} and all(isinstance(v, str) for v in t.values())
            for t in conv
        )
    ):
        raise bad("example", "conversation: a non-empty list of {role, content} strings")
    responses, scores = raw["responses"], raw["scores"]
    if not isinstance(responses, list) or not responses or not all(isinstance(r, str) for r in responses):
        raise bad("example", "responses: a non-empty list of strings")
    if (
        not isinstance(scores, list)
        or len(scores) != len(responses)
        or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores)
    ):
        raise bad("example", "scores: one finite number per response")
    tol = raw["tolerance"]
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (math.isfinite(tol) and tol >= 0):
        raise bad("example", "tolerance: a finite number >= 0")
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise bad("example", "source: where the card prints these scores")
    return Example(
        tuple(dict(t) for t in conv), tuple(responses), tuple(float(s) for s in scores), float(tol), raw["source"]
    )


def _read(text: str, where: str) -> list[KnownModel]:
    data = parse_yaml(text, where)
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise InputError(where, "must be a mapping with a list under 'models'", field="models")
    rows = [_row(raw, where, i) for i, raw in enumerate(data["models"])]
    seen: set[str] = set()
    for i, row in enumerate(rows):
        if row.id.lower() in seen:
            raise InputError(where, "this id is listed twice", item=f"{i} ({row.id})", field="id")
        seen.add(row.id.lower())
    return rows


@lru_cache(maxsize=1)
def _shipped() -> tuple[KnownModel, ...]:
    text = resources.files(__package__).joinpath(TABLE).read_text(encoding="utf-8")
    return tuple(_read(text, TABLE))


@lru_cache(maxsize=8)
def _extra(path: str, mtime_ns: int, size: int) -> tuple[KnownModel, ...]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read it (${ENV}): {getattr(exc, 'strerror', None) or exc}") from None
    return tuple(_read(text, path))


def known_models() -> tuple[KnownModel, ...]:
    """Every row of the table, in its order, then the rows of ``$RMB_KNOWN_MODELS`` (which replace a listed id)."""
    path = os.environ.get(ENV)
    if not path:
        return _shipped()
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(path, f"cannot read it (${ENV}): {exc.strerror or exc}") from None
    extra = _extra(path, st.st_mtime_ns, st.st_size)
    replaced = {m.id.lower() for m in extra}
    return tuple(m for m in _shipped() if m.id.lower() not in replaced) + extra


def lookup(name: str) -> KnownModel | None:
    """The row of a Hub id (case-insensitive), or None (a local folder or an unknown model)."""
    wanted = name.strip().lower()
    return next((m for m in known_models() if m.id.lower() == wanted), None)


def record_path(model_id: str) -> Path:
    """Where ``rmb models check`` keeps its last result for a model: the user cache, one file per id."""
    return user_cache_dir() / "model_checks" / f"{safe_name(model_id)}.json"


def check_status(row: KnownModel, commit: str | None) -> dict[str, Any]:
    """Whether ``rmb models check`` reproduced the row's card example with these weights (a Hub snapshot's commit).

    ``reproduced`` or ``differs`` only from a check record of this commit and this example; else ``not checked``
    with the reason."""
    if row.example is None:
        return {"status": "not checked", "why": "the row carries no card example"}
    if commit is None:
        return {"status": "not checked", "why": "the weights were not read from a local Hub snapshot"}
    path = record_path(row.id)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        record = None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {"status": "not checked", "why": f"its check record {path} is unreadable: run rmb models check {row.id}"}
    if (
        not isinstance(record, dict)
        or record.get("commit") != commit
        or record.get("example") != row.example.to_json()
        or record.get("status") not in ("reproduced", "differs")
    ):
        return {"status": "not checked", "why": f"no check of this commit and example: run rmb models check {row.id}"}
    return {
        k: record[k]
        for k in ("status", "commit", "max_difference", "tolerance", "dtype", "device", "at")
        if k in record
    }


def apply(row: KnownModel | None, options: RMOptions) -> RMOptions:
    """``options`` with the row's settings where the command line left the default; a model that ships
    its own code without ``--trust-remote-code`` stops with one line."""
    if row is None:
        return options
    if row.rm != "hf":
        raise RMBError(f"model {row.id!r} is a generative judge: run it as --rm {row.rm}:{row.id}@<endpoint>")
    if row.remote_code and not options.trust_remote_code:
        raise RMBError(
            f"model {row.id!r} ({row.family or 'family not sourced'}) ships its own modelling code: add --trust-remote-code to run it"
        )
    return dataclasses.replace(
        options,
        family=options.family or row.family,
        attn_implementation=options.attn_implementation or row.attn,
        max_length=options.max_length or row.max_length,
    )


__all__ = [
    "CLAIMS",
    "ENV",
    "REFS",
    "Example",
    "KnownModel",
    "apply",
    "check_status",
    "known_models",
    "lookup",
    "record_path",
]
