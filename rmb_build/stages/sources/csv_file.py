"""``kind: csv``: a CSV file with a header row, one record a row (columns named as in the header).

A row with more cells than the header has is quarantined; ``delimiter`` and ``encoding`` are options.
"""

from __future__ import annotations

import csv
from typing import Iterator, Literal

from pydantic import Field

from rmb_build.core.errors import InputError
from rmb_build.core.json_array import ArrayTail
from rmb_build.core.jsonl import BadLine
from rmb_build.stages.sources.base import RawRecord, Source, SourceOptions, source

_EXTRA = "\0extra"  # DictReader's key for the cells past the header's columns


class CsvOptions(SourceOptions):
    kind: Literal["csv"]
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    encoding: str = "utf-8"


@source("csv")
class CsvSource(Source):
    options = CsvOptions
    opts: CsvOptions

    def records(self, tail: ArrayTail) -> Iterator[RawRecord]:
        path = self.path()
        try:
            with open(path, encoding=self.opts.encoding, newline="") as fh:
                rows = csv.DictReader(fh, delimiter=self.opts.delimiter, restkey=_EXTRA)
                for row in rows:
                    where = rows.line_num  # the row's last line (a quoted cell may span lines)
                    extra = row.pop(_EXTRA, None)
                    if extra is not None:
                        yield (
                            where,
                            BadLine(
                                f"{len(extra)} more cells than the header has",
                                self.opts.delimiter.join(str(v) for v in row.values()),
                            ),
                        )
                    else:
                        yield where, row
        except UnicodeDecodeError as exc:
            raise InputError(
                str(path), f"not {self.opts.encoding} at byte {exc.start} (set the source's 'encoding')"
            ) from None
        except csv.Error as exc:
            raise InputError(str(path), f"invalid CSV: {exc}") from None
