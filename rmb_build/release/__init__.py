"""Releases: read and write RMB's layout and its Hugging Face form, audit them, describe them.

Opening any release or benchmark (a folder, the Hugging Face form, a Hub id, ``rmb`` by name, or the field's
other formats) is ``rmb_build.benchmarks.formats.open_release``, the one verb. ``read_release`` (any form of
RMB's layout) and ``read_rmb_release`` (the folder) are its readers inside this layer, which cannot import
``benchmarks``."""

from rmb_build.release.load import read_release
from rmb_build.release.read import Release, read_rmb_release
from rmb_build.release.write import write_release

__all__ = ["Release", "read_release", "read_rmb_release", "write_release"]
