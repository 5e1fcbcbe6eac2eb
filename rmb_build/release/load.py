"""An RMB release in any of its forms: RMB's folder layout, a local Hugging Face folder, or a Hub id."""

from __future__ import annotations

from pathlib import Path

from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.hub import check_hub_dataset, is_hub_id
from rmb_build.release.hf import is_hf_folder, read_hf_release
from rmb_build.release.read import Release, find_rmb_root, read_rmb_release, refuse_a_set_folder


def read_release(source: str | Path, strict: bool = True) -> Release:
    """Read a release from RMB's layout, a local Hugging Face folder, or a Hub dataset id."""
    path = Path(source)
    if path.exists():
        refuse_a_set_folder(path)
        if find_rmb_root(path) is not None:
            return read_rmb_release(path, strict=strict)
        if is_hf_folder(path):
            return read_hf_release(str(path), strict=strict)
        raise InputError(
            str(path),
            "not an RMB release: no Pairwise_set/ or BoN_set/ folder (in it or in its RMB_dataset/) and no "
            "Hugging Face form (Parquet files under pairwise/ or bon/)",
        )
    if is_hub_id(str(source)):
        check_hub_dataset(str(source))
        return read_hf_release(str(source), strict=strict)
    raise RMBError(f"{source}: no such release folder (and not a Hugging Face Hub id of the form ORG/NAME)")
