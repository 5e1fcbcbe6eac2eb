"""Whether the Hugging Face Hub may be asked: offline by the environment, or unreachable now. What a
reader of a model or a dataset by Hub id checks first, so that it fails at once instead of retrying."""

from __future__ import annotations

import os
import socket
import threading

from rmb_build.core.errors import RMBError

REACH_TIMEOUT_S = 3.0
_TRUE = {"1", "ON", "YES", "TRUE"}


def hub_offline() -> bool:
    return any(os.environ.get(v, "").upper() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


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


__all__ = ["check_hub_dataset", "hub_offline", "hub_reachable"]
