"""The one redaction rule: what can carry a credential is written everywhere as ``<redacted>``.

``redact(text)`` applies it to any text (an RM spec, a URL, a command line, an error or log line):
a URL's user info (``http://<redacted>@host/v1``), its query (tokens hide there: ``?api_key=``,
signed links; a fragment is a place in a page, ``https://docs.prefect.io/...#how-to-guides``, kept
but for its secret-named values, ``#access_token=<redacted>``), ``Authorization``/``Bearer`` values,
``key=value`` pairs whose name says secret, and API keys as providers spell them (``sk-…``, ``hf_…``,
``ghp_…``). ``redact_json`` applies
it to every string of a JSON object and blanks the value of any key named like a secret.

The real value stays only in the object that uses it (the endpoint config that sends requests);
every writer gets the redacted form. Redacting twice changes nothing.
"""

from __future__ import annotations

import re
from typing import Any, overload

REDACTED = "<redacted>"

# user:password@ of a URL: up to the last "@" before the path (a password may hold "@", ":" or ",").
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s]*@")
# A URL's query, to its fragment or the next white space.
_QUERY = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s?#]*)(\?)[^\s#]*")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
# A header as HTTP, a log line or a dict's repr writes it: ``Authorization: Bearer …``, ``'api-key': '…'``.
_HEADER = re.compile(
    r"""(?i)\b((?:proxy-)?authorization|x-api-key|api-key)(['"]?\s*[:=]\s*['"]?)"""
    r"""(?:(?:bearer|basic|token)\s+)?[^\s'",}]+"""
)
_SECRET_NAME = (
    r"(?:api[_-]?key|(?:access|id|refresh)[_-]?token|auth[_-]?token|token|secret|client[_-]?secret|password|passwd|pwd)"
)
_SECRET_PAIR = re.compile(rf"(?i)\b({_SECRET_NAME}=)[^&\s]+")  # key=value, as in a query or a command line
_SECRET_ITEM = re.compile(rf"""(?i)\b({_SECRET_NAME}['"]\s*:\s*['"]?)[^\s'",}}]+""")  # 'key': 'value' (JSON, a repr)
_TOKEN = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,})")
# JSON keys whose value is a secret whatever it looks like.
_SECRET_KEY = re.compile(
    r"(?i)(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|hf[_-]?token|token|secret|client[_-]?secret"
    r"|password|passwd|(?:proxy-)?authorization)"
)


def redact(text: str) -> str:
    """``text`` with every credential-bearing part replaced by ``<redacted>`` (see the module)."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _QUERY.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SECRET_ITEM.sub(lambda m: m.group(1) + REDACTED, text)
    return _TOKEN.sub(REDACTED, text)


@overload
def redact_json(value: str) -> str: ...
@overload
def redact_json(value: dict[Any, Any]) -> dict[Any, Any]: ...
@overload
def redact_json(value: list[Any] | tuple[Any, ...]) -> list[Any]: ...
@overload
def redact_json(value: object) -> object: ...
def redact_json(value: object) -> object:
    """``value`` (parsed JSON) with every string redacted and the value of a secret-named key blanked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and _SECRET_KEY.fullmatch(k) and v else redact_json(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return value


__all__ = ["REDACTED", "redact", "redact_json"]
