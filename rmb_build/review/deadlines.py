"""What a connection may hold of the review server before it is authenticated: its request's headers must
arrive within ``HEADER_S``, its body within ``BODY_S``, else the connection is dropped (the body: 408).

Uvicorn times out only an idle keep-alive connection: a request whose headers never end, or whose body
trickles, held its descriptor for ever, and 1,000 such connections (unauthenticated: the token is read
after the headers) locked every annotator out. The header clock lives in the HTTP protocol (an ASGI app
sees nothing before the headers end); the body clock is an ASGI middleware that reads the body, up to
``MAX_BODY``, before the app (and its authentication) runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_S = 10.0  # a browser sends its headers at once
BODY_S = 20.0  # a label's form is a few hundred bytes
KEEP_ALIVE_S = 5.0  # uvicorn's own default: an idle connection between requests


class HeaderDeadline(H11Protocol):
    """Uvicorn's h11 protocol, closing a connection whose request headers have not all arrived within
    ``HEADER_S`` of its opening (or of the first byte of its next request)."""

    _header_timer: asyncio.TimerHandle | None = None

    def _awaiting_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_timer is None and self._awaiting_headers():
            self._header_timer = self.loop.call_later(HEADER_S, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._awaiting_headers() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._arm()
        super().data_received(data)
        if not self._awaiting_headers():
            self._disarm()

    def on_response_complete(self) -> None:
        self._disarm()  # uvicorn's keep-alive timer watches the idle connection; the next byte arms ours
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class BodyDeadline:
    """ASGI middleware: a request's body, up to ``max_body`` bytes, is read before the app runs and must
    all arrive within ``BODY_S`` of its headers, else 408 and the connection closes. Past ``max_body`` (or
    a Content-Length over it) the app reads the rest itself and refuses it (413)."""

    def __init__(self, app: ASGIApp, max_body: int):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + BODY_S
        buffered: list[Message] = []
        size, more = 0, True
        while more and size <= self.max_body:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                late = PlainTextResponse("408 Request Timeout: the body did not arrive in time\n", status_code=408)
                late.headers["Connection"] = "close"
                await late(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            buffered.append(message)
            size += len(message.get("body", b""))
            more = message.get("more_body", False)

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)


def server_config(app: ASGIApp, host: str, port: int, max_body: int, **kw: Any) -> uvicorn.Config:
    """Uvicorn's config for the review page: headers and body on their deadlines, quiet."""
    return uvicorn.Config(
        BodyDeadline(app, max_body),
        host=host,
        port=port,
        http=HeaderDeadline,
        timeout_keep_alive=int(KEEP_ALIVE_S),
        log_level="warning",
        **kw,
    )


__all__ = ["BODY_S", "HEADER_S", "BodyDeadline", "HeaderDeadline", "server_config"]
