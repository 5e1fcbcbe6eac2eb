"""``kind: parquet``: a Parquet file, or every ``*.parquet`` under a folder, read in batches."""

from __future__ import annotations

from typing import Iterator, Literal

from rmb_build.core.errors import InputError
from rmb_build.core.json_array import ArrayTail
from rmb_build.stages.sources.base import RawRecord, Source, SourceOptions, source


class ParquetOptions(SourceOptions):
    kind: Literal["parquet"]


@source("parquet")
class ParquetSource(Source):
    options = ParquetOptions
    batch_size = 1024

    def records(self, tail: ArrayTail) -> Iterator[RawRecord]:
        import pyarrow.parquet as pq

        path = self.path()
        files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
        if not files:
            raise InputError(str(path), "no .parquet files in this folder", field="path")
        n = 0
        for file in files:
            try:
                pf = pq.ParquetFile(file)
            except Exception as exc:  # pyarrow raises several types for a non-Parquet file
                raise InputError(str(file), f"not a readable Parquet file: {exc}") from None
            for batch in pf.iter_batches(batch_size=self.batch_size):
                for row in batch.to_pylist():
                    yield n, row
                    n += 1
