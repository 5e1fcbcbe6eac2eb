"""The review page: a Starlette app over a ``ReviewStore`` and the release's items held in memory.

One item at a time per annotator (``/a/<name>``): the conversation, the goal's guidelines and the
scenario's criteria, the answers in the annotator's own order without model names, judge scores or the
release's label. A POST (``/a/<name>/label``, ``/a/<name>/undo``) commits before the next page is
served, then redirects to it.

Who may in: the annotator's name must be planned in ``review.db``; when the server listens beyond
loopback every request also needs the annotator's token (``?t=``; only its sha256 is stored), else
403; on loopback the ``Host`` must be a loopback name (a site rebound to 127.0.0.1 gets 400). POSTs
carry a per-annotator form token (an HMAC of the name under a secret kept in ``review.db``)
and are refused when the browser says they come from another site (``Origin``, ``Sec-Fetch-Site``).
The item a POST names is its position in the annotator's own queue, looked up in the database; nothing
from a request becomes a path. Every page is served with a Content-Security-Policy that allows only this
server's own script and style.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import parse_qs, quote, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
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
from rmb_build.review.choices import to_release_terms
from rmb_build.review.render import markdown_html
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
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


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
        if not token or not expected or not hmac.compare_digest(token_hash(token), expected):
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


def _item_view(page: ReviewPage, a: Assignment) -> dict:
    item = page.items[(a.key.set, a.key.uid)]
    answers = item.answers()
    pairwise = isinstance(item, PairwiseItem)
    return {
        "set": a.key.set,
        "pairwise": pairwise,
        "scenario": a.key.scenario,
        "goal": a.key.goal,
        "harmful": a.key.goal == HARMLESSNESS,
        "turns": [{"role": t.role, "html": markdown_html(t.content)} for t in item.conversation],
        "answers": [{"number": k + 1, "html": markdown_html(answers[i].answer)} for k, i in enumerate(a.order)],
        "criteria": markdown_html(_criteria(a.key.scenario)),
        "guidelines": markdown_html(_guidelines(a.key.goal)),
        "pos": a.pos,
    }


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

    async def show(request: Request) -> Response:
        token = request.query_params.get("t")
        name = _who(page, request, token)
        if isinstance(name, Response):
            return name
        done, total = page.store.progress(name)
        common = {
            "name": name,
            "done": done,
            "total": total,
            "percent": round(100 * done / total) if total else 100,
            "csrf": page.csrf(name),
            "token": token or "",
            "action": f"/a/{quote(name, safe='')}",
            "flags": FLAGS,
        }
        current = page.store.current(name)
        if current is None:
            return html("done.html", **common)
        page.store.shown(name, current.pos)
        return html("item.html", item=_item_view(page, current), **common)

    async def _form(request: Request) -> dict[str, list[str]] | Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return Response("415 Unsupported Media Type\n", status_code=415, media_type="text/plain", headers=HEADERS)
        body = await request.body()
        if len(body) > MAX_BODY:
            return Response("413 Payload Too Large\n", status_code=413, media_type="text/plain", headers=HEADERS)
        return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)

    async def _checked(request: Request) -> tuple[str, dict[str, list[str]]] | Response:
        form = await _form(request)
        if isinstance(form, Response):
            return form
        token = (form.get("t") or [""])[0] or request.query_params.get("t")
        name = _who(page, request, token)
        if isinstance(name, Response):
            return name
        if not _same_site(request):
            return _forbidden("a request from another site")
        if not hmac.compare_digest((form.get("csrf") or [""])[0], page.csrf(name)):
            return _forbidden("the form's token does not match; reload the page")
        return name, form

    async def label(request: Request) -> Response:
        checked = await _checked(request)
        if isinstance(checked, Response):
            return checked
        name, form = checked
        token = (form.get("t") or [""])[0] or None
        try:
            pos = int((form.get("pos") or [""])[0])
        except ValueError:
            return Response("400 Bad Request: pos\n", status_code=400, media_type="text/plain", headers=HEADERS)
        a = page.store.assignment(name, pos)
        if a is None:
            return Response(
                "400 Bad Request: no such item\n", status_code=400, media_type="text/plain", headers=HEADERS
            )
        try:
            choice = to_release_terms(a.key.set, a.order, (form.get("choice") or [""])[0])
        except RMBError as exc:
            return Response(f"400 Bad Request: {exc}\n", status_code=400, media_type="text/plain", headers=HEADERS)
        flags = tuple(f for f in FLAGS if f in form.get("flag", []))
        note = (form.get("note") or [""])[0][:MAX_NOTE]
        page.store.save(
            Label(a.key.set, a.key.uid, name, choice, flags, note), shown=(form.get("choice") or [""])[0], pos=pos
        )
        return RedirectResponse(_here(name, token), status_code=303, headers=HEADERS)

    async def undo(request: Request) -> Response:
        checked = await _checked(request)
        if isinstance(checked, Response):
            return checked
        name, form = checked
        page.store.undo(name)
        return RedirectResponse(_here(name, (form.get("t") or [""])[0] or None), status_code=303, headers=HEADERS)

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
    return (urlsplit(f"//{host_header}").hostname or "") if host_header else ""


class LoopbackHostOnly:
    """ASGI middleware answering 400 to any request whose ``Host`` is not a loopback name (IPv6 included:
    Starlette's TrustedHostMiddleware cuts ``[::1]:8000`` at its first colon)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = Headers(scope=scope).get("host", "")
            if host_name(host) not in LOOPBACK_NAMES:
                await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["ReviewPage", "create_app", "token_hash"]
