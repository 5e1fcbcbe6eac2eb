"""``kind: hf``: a Hugging Face dataset (a Hub name, a local folder or one local data file) via ``datasets``."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Literal

from pydantic import Field

from rmb_build.core.errors import InputError
from rmb_build.core.json_array import ArrayTail
from rmb_build.stages.sources.base import RawRecord, Source, SourceError, SourceOptions, source

_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv", ".arrow": "arrow"}


class HfOptions(SourceOptions):
    kind: Literal["hf"]
    name: str | None = Field(default=None, description="Hub configuration name")
    split: str = "train"
    streaming: bool = True


@source("hf")
class HfSource(Source):
    options = HfOptions
    opts: HfOptions

    def check(self) -> None:
        # a Hub id (or a local folder): `datasets` reports a bad one when gather opens it
        if not self.opts.path:
            raise SourceError("a 'hf' source needs a 'path'")

    def _remote(self) -> bool:
        return not Path(self.opts.path).exists() if self.opts.path else False

    def label(self) -> str:
        o = self.opts
        if self._remote():
            return f"hf:{o.path}" + (f":{o.name}" if o.name else "") + f":{o.split}"
        return super().label()

    def identity(self) -> object:
        return None  # the Hub dataset is named by the options; local files are not fingerprinted

    def records(self, tail: ArrayTail) -> Iterator[RawRecord]:
        import datasets

        o = self.opts
        if not o.path:
            raise InputError("hf", "an 'hf' source needs a 'path' (a Hub dataset name or a local folder)", field="path")
        local = Path(o.path).expanduser()
        builder = _BUILDERS.get(local.suffix.lower()) if local.is_file() else None
        try:
            if builder:  # a single local file: datasets needs the builder name and data_files
                ds = datasets.load_dataset(builder, data_files=str(local), split=o.split, streaming=o.streaming)
            else:
                ds = datasets.load_dataset(o.path, o.name, split=o.split, streaming=o.streaming)
        except (OSError, ValueError, datasets.exceptions.DatasetNotFoundError) as exc:  # OSError: also offline
            raise InputError(o.path, f"cannot load the dataset (split {o.split!r}): {exc}", field="path") from None
        yield from enumerate(ds)
