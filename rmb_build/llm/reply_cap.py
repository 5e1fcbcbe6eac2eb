"""A reply body over the endpoint's ``max_reply_bytes`` is refused as it arrives: never read whole into
memory, never cached (an endpoint answering megabytes filled 465 MB of cache from 144 calls).

A response hook of the OpenAI client's HTTP client (``httpx``, or the ``httpx2`` fork newer OpenAI
clients ship): it runs once the headers are in, refuses a Content-Length over the limit, and otherwise
wraps the body's stream so that the byte past the limit stops it."""

from __future__ import annotations

import sys
from typing import AsyncIterator, Awaitable, Callable, Mapping, Protocol


class _ByteStream(Protocol):
    """A response body's byte stream (``httpx.AsyncByteStream`` or ``httpx2``'s)."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class _Response(Protocol):
    """What the hook reads of a response (``httpx.Response`` or ``httpx2``'s) and replaces: its body's stream."""

    headers: Mapping[str, str]
    stream: _ByteStream

    async def aclose(self) -> None: ...


class ReplyTooLarge(Exception):
    def __init__(self, limit: int, size: int | None = None):
        self.limit = limit
        what = f"of {size} bytes" if size is not None else "past"
        super().__init__(f"reply body {what} over max_reply_bytes {limit}: refused")


_CAPPED: dict[type, type] = {}


def _capped_stream(response: _Response) -> type:
    """A byte stream class of the response's own HTTP package (its reader checks the stream's type)."""
    base = sys.modules[type(response).__module__.split(".")[0]].AsyncByteStream
    if base not in _CAPPED:

        class Capped(base):  # type: ignore[misc, valid-type]
            def __init__(self, inner: _ByteStream, limit: int):
                self.inner, self.limit = inner, limit

            async def __aiter__(self) -> AsyncIterator[bytes]:
                seen = 0
                async for chunk in self.inner:
                    seen += len(chunk)
                    if seen > self.limit:
                        raise ReplyTooLarge(self.limit)
                    yield chunk

            async def aclose(self) -> None:
                await self.inner.aclose()

        _CAPPED[base] = Capped
    return _CAPPED[base]


def reply_cap(limit: int) -> Callable[[_Response], Awaitable[None]]:
    """The response hook refusing a body over ``limit`` bytes."""

    async def check(response: _Response) -> None:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await response.aclose()
            raise ReplyTooLarge(limit, int(length))
        response.stream = _capped_stream(response)(response.stream, limit)

    return check


def too_large(exc: BaseException) -> ReplyTooLarge | None:
    """The ReplyTooLarge behind ``exc`` (the OpenAI client wraps transport errors), or None."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None or isinstance(seen, ReplyTooLarge):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
