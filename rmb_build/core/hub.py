"""What a name of the Hugging Face Hub looks like (``is_hub_id``: the one rule), and whether the Hub may be
asked: offline by the environment, or unreachable now. What a reader of a model or a dataset by Hub id
checks first, so that it fails at once instead of retrying."""

from __future__ import annotations

import os
import re
import socket
import threading

from rmb_build.core.errors import RMBError

REACH_TIMEOUT_S = 3.0
_TRUE = {"1", "ON", "YES", "TRUE"}
# huggingface_hub's validate_repo_id, ASCII only (the Hub refuses what its \w lets through): each part 1-96 of
# letters, digits, '_', '.', '-', no edge '.'/'-'; nowhere '--' or '..'; no '.git' at the end.
_HUB_PART = r"\w(?:[\w.-]{0,94}\w)?"
_NOWHERE = r"(?!.*(?:--|\.\.))(?!.*\.git$)"
HUB_ID = re.compile(rf"{_NOWHERE}{_HUB_PART}/{_HUB_PART}", re.ASCII)
HUB_ID_OR_NAME = re.compile(rf"{_NOWHERE}(?:{_HUB_PART}/)?{_HUB_PART}", re.ASCII)


def is_hub_id(name: str, org: bool = True) -> bool:
    """Whether ``name`` reads as a Hub repository id (``ORG/NAME``; with ``org=False`` a bare ``NAME``
    too, as older models are named) rather than a path. The caller looks for a local file first: a
    name that is both is read from disk."""
    return bool((HUB_ID if org else HUB_ID_OR_NAME).fullmatch(name))


def hub_offline() -> bool:
    return any(os.environ.get(v, "").upper() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def check_can_push() -> None:
    """RMBError (one line) where a push cannot even start: offline, or no token. Checked before any work
    (``rmb publish`` and ``rmb push-results``) and again by each push."""
    from huggingface_hub import get_token
    from huggingface_hub.constants import HF_HUB_OFFLINE

    if HF_HUB_OFFLINE:
        raise RMBError("cannot push: HF_HUB_OFFLINE is set (use --dry-run --out DIR to write the files)")
    if not get_token():
        raise RMBError("cannot push: no Hugging Face token (set HF_TOKEN or run 'hf auth login')")


def hub_reachable(timeout: float = REACH_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the Hub's host opens within ``timeout`` (name lookup included)."""
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    ok: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection(
                (url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=timeout
            ):
                ok.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)  # getaddrinfo has no timeout of its own
    thread.start()
    thread.join(timeout)
    return bool(ok)


def check_hub_dataset(repo_id: str) -> None:
    """Refuse a Hub dataset at once when the Hub cannot be reached and HF_HUB_OFFLINE is not set
    (``datasets`` would retry for most of a minute); offline, ``datasets`` reads its cache only."""
    if not hub_offline() and not hub_reachable():
        raise RMBError(
            f"{repo_id}: the Hugging Face Hub cannot be reached (offline?): set HF_HUB_OFFLINE=1 to read "
            "a copy from the local cache, or give a local file or folder"
        )


__all__ = ["check_hub_dataset", "hub_offline", "hub_reachable", "is_hub_id"]
