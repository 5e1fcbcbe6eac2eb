"""The review page: a Starlette app over a ``ReviewStore`` and the release's items held in memory.

One item at a time per annotator (``/a/<name>``): the conversation, the goal's guidelines and the
scenario's criteria, the answers in the annotator's own order without model names, judge scores or the
release's label. A POST (``/a/<name>/label``, ``/a/<name>/undo``) commits before the next page is
served, then redirects to it.

Who may in: the annotator's name must be planned in ``review.db``; when the server listens beyond
loopback every request also needs the annotator's token (``?t=``, in the URL of POSTs too; only its
sha256 is stored), else 403; on loopback the ``Host`` must be a loopback name (``localhost``, any of
127.0.0.0/8, ``::1``; a site rebound to 127.0.0.1 gets 400). POSTs carry a per-annotator form token (an
HMAC of the name under a secret kept in ``review.db``) and are refused when the browser says they come
from another site (``Origin``, ``Sec-Fetch-Site``). The item a POST names is its position in the
annotator's own queue, looked up in the database; nothing from a request becomes a path. Every page is
served with a Content-Security-Policy that allows only this server's own script and style.

What a request can cost: the name, the token and the site are checked before a POST's body is read, and
the body is read as it streams, refused (413) past ``MAX_BODY``; every field that is not what the page
sends gets one line of 400. Items are rendered in a worker thread (the event loop keeps serving the
others), each text cut at ``render.SHOWN_CHARS`` unless the page is asked for all of it (``?all=1``), and
all of a text past ``render.MARKDOWN_CHARS`` shown as plain text. A connection whose request headers or
body do not arrive within ``HEADER_S``/``BODY_S`` is dropped (408) before anything else is read
(``review/deadlines.py``): idle half-sent requests once held descriptors until every annotator was out.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping
from urllib.parse import parse_qs, quote, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Item, PairwiseItem
from rmb_build.core.prompting import criteria_for, load_prompt
from rmb_build.core.taxonomy import HARMLESSNESS
from rmb_build.release.review_labels import FLAGS, Label
from rmb_build.review.choices import quoted, to_release_terms
from rmb_build.review.render import MARKDOWN_CHARS, markdown_html, shown_part, text_html
from rmb_build.review.store import Assignment, ReviewStore

MAX_BODY = 64 * 1024
MAX_NOTE = 4000
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make browsers send "Origin: null" with our own POSTs
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
STATIC = {"review.css": "text/css", "review.js": "text/javascript"}
FORM_FIELDS = {"label": ("csrf", "pos", "choice", "flag", "note"), "undo": ("csrf",)}
REPEATABLE = ("flag",)
Handler = Callable[[Request], Awaitable[Response]]
_POSITION = re.compile(r"0|[1-9][0-9]{0,8}")  # ASCII only: int() reads '٣' and '+3', and 10**23 overflows SQLite


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, no port) is this machine: ``localhost``, 127.0.0.0/8, ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same(given: str, expected: str) -> bool:
    """A constant-time comparison that takes any text (``hmac.compare_digest`` raises on non-ASCII str)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


class BadRequest(Exception):
    """A request the page would not send: answered 400 with this one line."""


@dataclass
class ReviewPage:
    """What the app serves from: the store, the release's items by (set, uid), and the access rules."""

    store: ReviewStore
    items: Mapping[tuple[str, str], Item]
    require_token: bool
    release_name: str

    def __post_init__(self) -> None:
        meta = self.store.meta()
        self.secret = bytes.fromhex(meta["csrf_secret"])
        self.annotators = set(self.store.annotators())
        self.hashes = self.store.token_hashes()
        self.env = Environment(
            loader=PackageLoader("rmb_build.review", "templates"), autoescape=select_autoescape(default=True)
        )

    def csrf(self, name: str) -> str:
        return hmac.new(self.secret, f"form:{name}".encode("utf-8"), hashlib.sha256).hexdigest()


def _forbidden(why: str) -> Response:
    return Response(f"403 Forbidden: {why}\n", status_code=403, media_type="text/plain", headers=HEADERS)


def _who(page: ReviewPage, request: Request, token: str | None) -> str | Response:
    name = request.path_params["name"]
    if name not in page.annotators:
        return Response("404 Not Found: no such annotator\n", status_code=404, media_type="text/plain", headers=HEADERS)
    if page.require_token:
        expected = page.hashes.get(name)
        if not token or not expected or not _same(token_hash(token), expected):
            return _forbidden("this page needs the annotator's link with its token")
    return name


def _same_site(request: Request) -> bool:
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:  # not a browser's cross-site form (browsers send Origin with every POST)
        return True
    return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"


def _here(name: str, token: str | None) -> str:
    return f"/a/{quote(name, safe='')}" + (f"?t={quote(token, safe='')}" if token else "")


def _criteria(scenario: str) -> str:
    try:
        return criteria_for(scenario)
    except (FileNotFoundError, ValueError):
        return "(no criteria for this scenario)"


def _guidelines(goal: str) -> str:
    try:
        return load_prompt(f"review/{goal}.md")
    except FileNotFoundError:
        return ""


def _text(text: str, everything: bool) -> dict:
    """One text as HTML, cut at ``render.SHOWN_CHARS`` unless ``everything`` (``cut``: how much of how much is shown)."""
    part = text if everything else shown_part(text)
    cut = {"shown": len(part), "of": len(text)} if len(part) < len(text) else None
    return {"html": text_html(part), "cut": cut, "plain": len(part) > MARKDOWN_CHARS}


def _item_view(page: ReviewPage, a: Assignment, everything: bool = False) -> dict:
    """The item's page, rendered (Markdown of a long text takes seconds: the app calls this in a worker thread)."""
    item = page.items[(a.key.set, a.key.uid)]
    answers = item.answers()
    pairwise = isinstance(item, PairwiseItem)
    return {
        "set": a.key.set,
        "pairwise": pairwise,
        "scenario": a.key.scenario,
        "goal": a.key.goal,
        "harmful": a.key.goal == HARMLESSNESS,
        "turns": [{"role": t.role, **_text(t.content, everything)} for t in item.conversation],
        "answers": [{"number": k + 1, **_text(answers[i].answer, everything)} for k, i in enumerate(a.order)],
        "criteria": markdown_html(_criteria(a.key.scenario)),
        "guidelines": markdown_html(_guidelines(a.key.goal)),
        "pos": a.pos,
    }


def _plain(status: int, text: str) -> Response:
    return Response(f"{text}\n", status_code=status, media_type="text/plain", headers=HEADERS)


def _bad_requests(handler):
    """``handler`` with its ``BadRequest`` answered 400 in one line."""

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except BadRequest as exc:
            return _plain(400, f"400 Bad Request: {exc}")

    return answer


def _query_one(request: Request, key: str) -> str | None:
    values = request.query_params.getlist(key)
    if len(values) > 1:
        raise BadRequest(f"query {key!r} given {len(values)} times")
    return values[0] if values else None


def _one(form: dict[str, list[str]], key: str) -> str:
    return (form.get(key) or [""])[0]


async def _form(request: Request, fields: tuple[str, ...]) -> dict[str, list[str]] | Response:
    """The POST's form, read as it streams and refused (413) past ``MAX_BODY``; only ``fields``, each
    once (``REPEATABLE`` ones once per value), in UTF-8."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return _plain(415, "415 Unsupported Media Type")
    length = request.headers.get("content-length")
    if length is not None and not (
        length.isascii() and length.isdigit() and len(length) <= 9 and int(length) <= MAX_BODY
    ):
        return _plain(413, "413 Payload Too Large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return _plain(413, "413 Payload Too Large")
    try:
        form = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body), errors="strict")
    except ValueError:  # UnicodeDecodeError included
        raise BadRequest("the form is not URL-encoded UTF-8") from None
    for key, values in form.items():
        if key not in fields:
            raise BadRequest(f"field {quoted(key)} is not one of this form's ({', '.join(fields)}); reload the page")
        if len(values) > (len(set(values)) if key in REPEATABLE else 1):
            raise BadRequest(f"field {key!r} given more than once" + (" with one value" if key in REPEATABLE else ""))
    return form


def _position(value: str) -> int:
    if not _POSITION.fullmatch(value):
        raise BadRequest(f"field 'pos': {quoted(value)} is not a position in the queue (0, 1, 2, ...)")
    return int(value)


def create_app(page: ReviewPage) -> Starlette:
    """The Starlette app of the review page."""

    def html(template: str, status: int = 200, **context) -> HTMLResponse:
        body = page.env.get_template(template).render(release=page.release_name, **context)
        return HTMLResponse(body, status_code=status, headers=HEADERS)

    async def index(request: Request) -> Response:
        if page.require_token:
            return _forbidden("open the link printed for you when the server started")
        people = [
            {"name": n, "url": _here(n, None), "progress": page.store.progress(n)} for n in page.store.annotators()
        ]
        return html("index.html", people=people)

    @_bad_requests
    async def show(request: Request) -> Response:
        token = _query_one(request, "t")
        everything = _query_one(request, "all")
        if everything not in (None, "1"):
            raise BadRequest(f"query 'all': {quoted(everything)}, not 1")
        name = _who(page, request, token)
        if isinstance(name, Response):
            return name
        done, total = page.store.progress(name)
        here = _here(name, token)
        common = {
            "name": name,
            "done": done,
            "total": total,
            "percent": round(100 * done / total) if total else 100,
            "csrf": page.csrf(name),
            "action": f"/a/{quote(name, safe='')}",
            "query": here[len(_here(name, None)) :],
            "all_url": here + ("&" if token else "?") + "all=1",
            "flags": FLAGS,
            "markdown_chars": MARKDOWN_CHARS,
        }
        current = page.store.current(name)
        if current is None:
            return html("done.html", **common)
        page.store.shown(name, current.pos)
        item = await run_in_threadpool(_item_view, page, current, everything == "1")
        return html("item.html", item=item, **common)

    def posted(action: str) -> Callable[[Callable[[str, dict[str, list[str]]], None]], Handler]:
        """A POST handler: who posts (name and token from the URL), from which site, and their form (the body is
        read last) checked; then ``act(name, form)``, then back to their page."""

        def handler(act: Callable[[str, dict[str, list[str]]], None]) -> Handler:
            @_bad_requests
            async def post(request: Request) -> Response:
                token = _query_one(request, "t")
                name = _who(page, request, token)
                if isinstance(name, Response):
                    return name
                if not _same_site(request):
                    return _forbidden("a request from another site")
                form = await _form(request, FORM_FIELDS[action])
                if isinstance(form, Response):
                    return form
                if not _same(_one(form, "csrf"), page.csrf(name)):
                    return _forbidden("the form's token does not match; reload the page")
                act(name, form)
                return RedirectResponse(_here(name, token), status_code=303, headers=HEADERS)

            return post

        return handler

    @posted("label")
    def label(name: str, form: dict[str, list[str]]) -> None:
        pos = _position(_one(form, "pos"))
        a = page.store.assignment(name, pos)
        if a is None:
            raise BadRequest(f"field 'pos': no item {pos} in {name}'s queue")
        shown = _one(form, "choice")
        try:
            choice = to_release_terms(a.key.set, a.order, shown)
        except RMBError as exc:
            raise BadRequest(f"field 'choice': {exc}") from None
        given = form.get("flag", [])
        unknown = [f for f in given if f not in FLAGS]
        if unknown:
            raise BadRequest(f"field 'flag': {quoted(unknown[0])} is not one of {', '.join(FLAGS)}")
        note = _one(form, "note")
        if len(note.replace("\r\n", "\n")) > MAX_NOTE:  # browsers send a textarea's line ends as CRLF
            raise BadRequest(f"field 'note': longer than {MAX_NOTE} characters")
        flags = tuple(f for f in FLAGS if f in given)
        page.store.save(Label(a.key.set, a.key.uid, name, choice, flags, note), shown=shown, pos=pos)

    @posted("undo")
    def undo(name: str, form: dict[str, list[str]]) -> None:
        page.store.undo(name)

    def static(file: str):
        async def serve(request: Request) -> Response:
            text = page.env.loader.get_source(page.env, file)[0]
            return Response(text, media_type=STATIC[file], headers=HEADERS)

        return serve

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204, headers=HEADERS)

    routes = [
        Route("/", index),
        Route("/favicon.ico", no_icon),
        Route("/a/{name}", show),
        Route("/a/{name}/label", label, methods=["POST"]),
        Route("/a/{name}/undo", undo, methods=["POST"]),
        *(Route(f"/static/{file}", static(file)) for file in STATIC),
    ]
    app = Starlette(routes=routes)
    if not page.require_token:  # on loopback, no other Host: a page of another site rebound to 127.0.0.1 gets 400
        app.add_middleware(LoopbackHostOnly)
    return app


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port; an IPv6 address keeps its brackets off
    (``[::1]:8000`` -> ``::1``)."""
    try:
        return (urlsplit(f"//{host_header}").hostname or "") if host_header else ""
    except ValueError:  # "[::1" and the like
        return ""


class LoopbackHostOnly:
    """ASGI middleware answering 400 to any request whose ``Host`` is not loopback (``is_loopback``; IPv6
    included: Starlette's TrustedHostMiddleware cuts ``[::1]:8000`` at its first colon)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = Headers(scope=scope).get("host", "")
            if not is_loopback(host_name(host)):
                await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["MAX_BODY", "ReviewPage", "create_app", "is_loopback", "token_hash"]
