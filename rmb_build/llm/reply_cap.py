"""A reply body over the endpoint's ``max_reply_bytes`` is refused as it arrives: never read whole into
memory, never cached (an endpoint answering megabytes filled 465 MB of cache from 144 calls)."""

from __future__ import annotations

from typing import AsyncIterator

import httpx


class ReplyTooLarge(Exception):
    def __init__(self, limit: int, size: int | None = None):
        self.limit = limit
        what = f"of {size} bytes" if size is not None else "past"
        super().__init__(f"reply body {what} over max_reply_bytes {limit}: refused")


class _Capped(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int):
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


class CappedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, refusing a body over ``limit`` bytes: at its Content-Length when it gives one,
    else at the byte that passes the limit."""

    def __init__(self, limit: int):
        self.limit = limit
        self.inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:
            await response.aclose()
            raise ReplyTooLarge(self.limit, int(length))
        response.stream = _Capped(response.stream, self.limit)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def too_large(exc: BaseException) -> ReplyTooLarge | None:
    """The ReplyTooLarge behind ``exc`` (the OpenAI client wraps transport errors), or None."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None or isinstance(seen, ReplyTooLarge):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
