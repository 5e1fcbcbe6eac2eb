"""The keys every query-source kind takes; each kind's options class adds its own (``base.source``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SourceOptions(BaseModel):
    """The keys every source kind takes (``kind`` decides which other keys exist)."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    path: str | None = None  # a file or a folder (a Hub dataset name for kind 'hf')
    fields: dict[str, str] = Field(default_factory=dict, description="our field -> the source's field")
    languages: list[str] | None = None
    max_turns: int | None = Field(default=None, ge=1)
    min_chars: int = Field(default=1, ge=0)
    max_chars: int | None = Field(default=None, ge=1)
    limit: int | None = Field(default=None, ge=1)
    skip: int = Field(default=0, ge=0)
    license: str | None = None
    labels: str | None = Field(
        default=None, description="a label set (a shipped set's name or a JSONL path): scenario labels annotators gave"
    )
    labelled_only: bool = Field(default=False, description="keep only the records the label set gives a scenario")

    @model_validator(mode="after")
    def _labelled_only_needs_labels(self) -> "SourceOptions":
        if self.labelled_only and not self.labels:
            raise ValueError("labelled_only needs a label set in 'labels'")
        return self
