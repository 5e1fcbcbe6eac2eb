"""``kind: json``: a top-level JSON array, streamed element by element (a cut-off end is reported)."""

from __future__ import annotations

from typing import Iterator, Literal

from rmb_build.core.json_array import ArrayTail, iter_json_array
from rmb_build.stages.sources.base import RawRecord, Source, SourceOptions, source


class JsonOptions(SourceOptions):
    kind: Literal["json"]


@source("json")
class JsonSource(Source):
    options = JsonOptions

    def records(self, tail: ArrayTail) -> Iterator[RawRecord]:
        yield from iter_json_array(self.path(), tail)
