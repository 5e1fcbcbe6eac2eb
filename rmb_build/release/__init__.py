"""Releases: read and write RMB's layout and its Hugging Face form, audit them."""

from rmb_build.release.formats import FORMATS, open_release
from rmb_build.release.read import Release, read_release, read_rmb_release
from rmb_build.release.write import write_release

__all__ = ["FORMATS", "Release", "open_release", "read_release", "read_rmb_release", "write_release"]
