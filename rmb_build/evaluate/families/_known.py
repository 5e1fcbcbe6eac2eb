"""The known-models table (``known_models.yaml``): how each well-known open-weight RM loads here.

``hf:<hub id>`` looks its id up; a row fills every option the command line left at its default
(``--family`` and the others override it) and is recorded in results.json. A model not in the table
loads as a plain sequence classifier, with the head check.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from rmb_build.core.errors import RMBError

TABLE = "known_models.yaml"


@dataclass(frozen=True)
class KnownModel:
    id: str
    family: str
    dtype: str | None = None
    attn: str | None = None
    max_length: int | None = None
    remote_code: bool = False
    tested_with: str | None = None
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, "", False)}


@lru_cache(maxsize=1)
def known_models() -> tuple[KnownModel, ...]:
    """Every row of the table, in its order."""
    text = resources.files(__package__).joinpath(TABLE).read_text(encoding="utf-8")
    return tuple(KnownModel(**row) for row in yaml.safe_load(text)["models"])


def lookup(name: str) -> KnownModel | None:
    """The row of a Hub id (case-insensitive), or None (a local folder or an unknown model)."""
    wanted = name.strip().lower()
    return next((m for m in known_models() if m.id.lower() == wanted), None)


def apply(row: KnownModel | None, options: Any) -> Any:
    """``options`` with the row's settings where the command line left the default; a model that ships
    its own code without ``--trust-remote-code`` stops with one line."""
    if row is None:
        return options
    if row.remote_code and not options.trust_remote_code:
        raise RMBError(
            f"model {row.id!r} ({row.family}) ships its own modelling code: add --trust-remote-code to run it"
        )
    return dataclasses.replace(
        options,
        family=options.family or row.family,
        attn_implementation=options.attn_implementation or row.attn,
        max_length=options.max_length or row.max_length,
    )


__all__ = ["KnownModel", "apply", "known_models", "lookup"]
