"""``kind: jsonl``: one JSON object a line; a broken line is quarantined, not fatal."""

from __future__ import annotations

from typing import Iterator, Literal

from rmb_build.core.json_array import ArrayTail
from rmb_build.core.jsonl import iter_jsonl
from rmb_build.stages.sources.base import RawRecord, Source, SourceOptions, source


class JsonlOptions(SourceOptions):
    kind: Literal["jsonl"]


@source("jsonl")
class JsonlSource(Source):
    options = JsonlOptions

    def records(self, tail: ArrayTail) -> Iterator[RawRecord]:
        yield from iter_jsonl(self.path(), lenient=True)
