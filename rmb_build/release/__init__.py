"""Releases: read and write RMB's layout and its Hugging Face form, audit them."""

from .read import Release, read_release, read_rmb_release
from .write import write_release

__all__ = ["Release", "read_release", "read_rmb_release", "write_release"]
