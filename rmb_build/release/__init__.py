"""Releases: read and write RMB's layout and its Hugging Face form, audit them, describe them.

Opening any benchmark (a folder, the Hugging Face form, a Hub id, ``rmb`` by name, or the field's other
formats) is ``rmb_build.benchmarks.formats.open_release``."""

from rmb_build.release.load import read_release
from rmb_build.release.read import Release, read_rmb_release
from rmb_build.release.write import write_release

__all__ = ["Release", "read_release", "read_rmb_release", "write_release"]
