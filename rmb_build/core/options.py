"""The base of every options model: pydantic, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Options that refuse unknown keys (a misspelt key is an error, never ignored)."""

    model_config = ConfigDict(extra="forbid")
