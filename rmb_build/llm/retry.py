"""Which failures are worth retrying, and how long to wait before the next try."""

from __future__ import annotations

import email.utils
import json
import random
import time
from dataclasses import dataclass
from typing import Mapping

import openai

from rmb_build.llm.reply_cap import too_large

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
OUTAGE_POLL_MAX_S = 15.0  # longest wait between two tries at an unreachable endpoint


@dataclass(frozen=True)
class CallFailure:
    kind: str  # rate_limit | server | timeout | unreachable | dropped | bad_response | fatal
    reason: str  # one line for ChatResult.error and logs
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind != "fatal"


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def classify(exc: BaseException) -> CallFailure:
    """Turn an exception from one call into a CallFailure (never raises)."""
    if (big := too_large(exc)) is not None:  # the same request would be as large again: not retried
        return CallFailure("fatal", str(big))
    if isinstance(exc, openai.APITimeoutError):
        return CallFailure("timeout", "timed out waiting for the reply")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        detail = f"{type(cause).__name__}: {cause}".rstrip(": ")
        # openai may ship its own httpx fork (httpx2): match the transport error by name.
        if isinstance(cause, ConnectionRefusedError) or type(cause).__name__ == "ConnectError":
            return CallFailure("unreachable", f"cannot connect: {detail}")
        return CallFailure("dropped", f"connection dropped: {detail}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = f"HTTP {status}: {str(exc.message)[:200]}"
        after = retry_after(exc.response.headers if exc.response is not None else None)
        if status == 429:
            return CallFailure("rate_limit", detail, after)
        if status in RETRY_STATUS:
            return CallFailure("server", detail, after)
        return CallFailure("fatal", detail)
    if (
        isinstance(
            exc,
            (
                openai.APIResponseValidationError,
                json.JSONDecodeError,
                ValueError,
                KeyError,
                TypeError,
                AttributeError,
                IndexError,
            ),
        )
        or type(exc).__name__ == "DecodingError"
    ):
        return CallFailure("bad_response", f"malformed response: {type(exc).__name__}: {str(exc)[:200]}")
    if isinstance(exc, OSError) or type(exc).__name__ in ("TransportError", "NetworkError", "RemoteProtocolError"):
        return CallFailure("dropped", f"{type(exc).__name__}: {exc}")
    return CallFailure("fatal", f"{type(exc).__name__}: {str(exc)[:200]}")


def backoff_s(attempt: int, base_s: float, max_s: float, after: float | None = None) -> float:
    """Exponential backoff with jitter for the ``attempt``-th retry (1-based); at least ``after``."""
    delay = min(max_s, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
    return max(delay, after) if after is not None else delay


class RetryRules:
    """One request's retries: what is retried, how often, and the wait before the next try.

    Transient failures (429, 5xx, timeouts, dropped or malformed replies) back off exponentially
    with jitter, at least as long as a Retry-After asks, up to ``max_retries`` times. An unreachable
    endpoint is an outage, waited out up to ``outage_limit_s`` on its own backoff: every waiting
    request would otherwise knock about once a second (a one-minute outage cost 473 connection
    attempts from 8 requests), and the cap of OUTAGE_POLL_MAX_S notices the endpoint's return soon.
    """

    def __init__(self, max_retries: int, outage_limit_s: float, base_s: float, max_s: float):
        self.max_retries, self.outage_limit_s = max_retries, outage_limit_s
        self.base_s, self.max_s = base_s, max_s
        self._retries = 0
        self._outage_since: float | None = None
        self._outage_tries = 0

    def next(self, failure: CallFailure, attempts: int) -> float | str:
        """Seconds to wait before trying again, or the final error (a string) when not to."""
        if not failure.retryable:
            return failure.reason
        if failure.kind == "unreachable":
            self._outage_since = self._outage_since or time.monotonic()
            self._outage_tries += 1
            if time.monotonic() - self._outage_since > self.outage_limit_s:
                return f"endpoint unreachable for over {self.outage_limit_s:g}s: {failure.reason}"
            return backoff_s(self._outage_tries, self.base_s, min(self.max_s, OUTAGE_POLL_MAX_S))
        self._outage_since, self._outage_tries = None, 0
        self._retries += 1
        if self._retries > self.max_retries:
            return f"gave up after {attempts} attempts: {failure.reason}"
        return backoff_s(self._retries, self.base_s, self.max_s, failure.retry_after)
