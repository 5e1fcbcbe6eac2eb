"""rmb review serve under hostile requests: a body is refused before it is read, a long item is shown in
part (all of it on request) and rendered off the event loop, every malformed field gets one line of 400,
and any loopback address is loopback."""

from __future__ import annotations

import asyncio
import random
import re
import socket
import threading
from contextlib import contextmanager

import pytest
from review_helpers import long_release, small_release, table

from rmb_build.release.read import read_rmb_release
from rmb_build.release.review_labels import Label
from rmb_build.review.app import MAX_BODY, create_app, is_loopback
from rmb_build.review.session import Settings, open_session


def _session(tmp_path, release, require_token=False, overlap=1.0):
    rel = read_rmb_release(release)
    return open_session(
        str(tmp_path / "review.db"), rel, "rel", Settings(["ann", "bob"], None, overlap, 0), require_token=require_token
    )


def _client(page, host="127.0.0.1:8765"):
    from starlette.testclient import TestClient

    return TestClient(create_app(page), base_url=f"http://{host}", raise_server_exceptions=False)


def _form(html: str) -> dict:
    return {k: re.search(rf'name="{k}" value="([^"]*)"', html).group(1) for k in ("csrf", "pos")}


@contextmanager
def _server(app):
    """``app`` behind a real uvicorn on 127.0.0.1 (a thread); yields (port, bytes of body the app pulled)."""
    import uvicorn

    pulled: list[int] = []

    async def counting(scope, receive, send):
        async def counted():
            message = await receive()
            pulled.append(len(message.get("body", b"")))
            return message

        await app(scope, counted, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(counting, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            if server.started:
                break
            thread.join(0.05)
        assert server.started, "uvicorn did not start"
        yield sock.getsockname()[1], pulled
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _post_raw(port: int, path: str, headers: dict[str, str], body: bytes) -> int:
    """Send the request line, ``headers`` and ``body`` (less than they announce, or an unfinished chunked
    body), then read the status: a server that waits for the rest times out here."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        s.sendall(head.encode("ascii") + body)
        answer = b""
        while b"\r\n" not in answer:
            got = s.recv(4096)
            if not got:
                break
            answer += got
    return int(answer.split(b" ")[1]) if answer else 0


def test_a_body_is_refused_before_it_is_read(tmp_path):
    page, tokens = _session(tmp_path, small_release(tmp_path / "rel"), require_token=True)
    form = {"content-type": "application/x-www-form-urlencoded"}
    gib = {**form, "content-length": str(2**30)}
    with _server(create_app(page)) as (port, pulled):
        # no token: 403 before a byte of the body is read
        assert _post_raw(port, "/a/ann/label", gib, b"x" * 16384) == 403
        assert sum(pulled) == 0
        # the token, but 1 GiB announced: 413 unread
        path = f"/a/ann/label?t={tokens['ann']}"
        assert _post_raw(port, path, gib, b"x" * 16384) == 413
        assert sum(pulled) == 0
        # streamed with no length and no end: read as far as the cap, then 413
        chunk = b"%x\r\n%s\r\n" % (32768, b"x" * 32768)
        chunked = {**form, "transfer-encoding": "chunked"}
        assert _post_raw(port, path, chunked, chunk * 4) == 413
        assert sum(pulled) > MAX_BODY


def _long_page(tmp_path, chars: int, require_token=False):
    release = long_release(tmp_path / "rel", "Here:\n\n" + table(chars))
    page, tokens = _session(tmp_path, release, require_token=require_token)
    if page.store.current("ann").key.uid == "1":  # ann's current item: the long one
        page.store.save(Label("pairwise", "1", "ann", "tie"))
    return page, tokens


def test_a_long_item_is_shown_in_part_with_a_link_to_all_of_it(tmp_path):
    page, _ = _long_page(tmp_path, 2_000_000)
    r = _client(page).get("/a/ann")
    assert r.status_code == 200 and "Question 0?" in r.text
    assert len(r.text) < 200_000 and "LAST-ROW" not in r.text and "<table>" in r.text
    total = len(page.items[("pairwise", "0")].chosen.answer)
    assert re.search(
        rf"Shown: the first [0-9,]+ of {total:,} characters\. <a href=\"/a/ann\?all=1\">Show all</a>", r.text
    )


def test_show_all_renders_the_whole_text(tmp_path):
    page, _ = _long_page(tmp_path, 50_000)  # Markdown up to render.MARKDOWN_CHARS
    client = _client(page)
    assert "LAST-ROW" not in client.get("/a/ann").text
    r = client.get("/a/ann?all=1")
    assert "<td>LAST-ROW</td>" in r.text and "Show all" not in r.text
    assert client.get("/a/ann?all=2").status_code == 400
    # behind a token the link keeps it
    page, tokens = _long_page(tmp_path / "t", 50_000, require_token=True)
    r = _client(page, "10.1.2.3:8765").get("/a/ann", params={"t": tokens["ann"]})
    assert f'href="/a/ann?t={tokens["ann"]}&amp;all=1"' in r.text


def test_show_all_of_a_text_past_the_markdown_cap_is_plain_text(tmp_path, monkeypatch):
    """All of a 2 MB text is shown as escaped plain text: its Markdown took 51 s and 1.48 GB and held every
    other annotator's page for seconds (``bench/review_show_all.py`` measures both)."""
    import rmb_build.review.render as render

    real = render._markdown

    def capped():
        md = real()

        class Capped:
            def render(self, text):
                assert len(text) <= render.MARKDOWN_CHARS, f"{len(text)} characters rendered as Markdown"
                return md.render(text)

        return Capped()

    monkeypatch.setattr(render, "_markdown", capped)
    release = long_release(tmp_path / "rel", "Here:\n\n" + table(2_000_000) + HOSTILE_TEXT)
    page, _ = _session(tmp_path, release)
    if page.store.current("ann").key.uid == "1":
        page.store.save(Label("pairwise", "1", "ann", "tie"))
    r = _client(page).get("/a/ann?all=1")
    assert r.status_code == 200, r.text[-2000:]
    assert '<pre class="plain">Here:' in r.text and "| LAST-ROW | end | 0 |" in r.text
    assert "<td>" not in r.text.split('<pre class="plain">')[1]  # the long text's rows, not a rendered table
    assert "&lt;script&gt;" in r.text and "<script>alert" not in r.text
    assert "Shown as plain text" in r.text and "Show all" not in r.text


HOSTILE_TEXT = "\n<script>alert(1)</script>\n"


def test_an_item_rendering_does_not_hold_up_other_annotators(tmp_path, monkeypatch):
    """ann's item renders (held at a gate) while bob's page is served: rendering is off the event loop."""
    import httpx

    import rmb_build.review.app as app_module

    page, _ = _session(tmp_path, long_release(tmp_path / "rel", "SLOW-TEXT " + table(1000)))
    for name, other in (("ann", "1"), ("bob", "0")):  # ann's current item is the long one, bob's the short one
        if page.store.current(name).key.uid == other:
            page.store.save(Label("pairwise", other, name, "tie"))
    assert page.store.current("ann").key.uid == "0" and page.store.current("bob").key.uid == "1"
    started, gate = threading.Event(), threading.Event()
    real = app_module.text_html

    def held(text):
        if "SLOW-TEXT" in text:
            started.set()
            gate.wait(20)  # a fail-safe: rendered on the event loop, bob waits all of it and the order shows it
        return real(text)

    monkeypatch.setattr(app_module, "text_html", held)
    finished: list[str] = []

    async def both():
        transport = httpx.ASGITransport(app=create_app(page))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:

            async def get(name):
                r = await client.get(f"/a/{name}")
                finished.append(name)
                return r

            slow = asyncio.create_task(get("ann"))
            while not started.is_set():
                await asyncio.sleep(0.01)
            fast = await get("bob")
            gate.set()
            return fast, await slow

    fast, slow = asyncio.run(both())
    assert finished == ["bob", "ann"]
    assert "A short answer." in fast.text and "SLOW-TEXT" in slow.text


HOSTILE_VALUES = [
    "",
    " ",
    "-1",
    "+1",
    " 1",
    "1 ",
    "1_0",
    "0x1",
    "1e3",
    str(10**23),
    "9" * 5000,
    "٣",
    "²",
    "١",
    "１",
    "\x00",
    "\ud800",
    "é",
    "<script>",
    "tie\n",
    "x" * 70_000,
]


def _post(client, fields, query="", **kw):
    return client.post(
        "/a/ann/label" + query,
        content=fields if isinstance(fields, bytes) else "&".join(f"{k}={v}" for k, v in fields),
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
        **kw,
    )


def _quoted(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="", errors="surrogatepass")


def _one_line_400(r) -> bool:
    return r.status_code in (400, 413) and r.text.count("\n") == 1 and r.text.startswith(str(r.status_code))


def test_every_malformed_field_is_one_line_of_400(tmp_path):
    page, _ = _session(tmp_path, small_release(tmp_path / "rel"))
    client = _client(page)
    good = _form(client.get("/a/ann").text)
    base = [("csrf", good["csrf"]), ("pos", good["pos"]), ("choice", "1")]
    cases = []
    for field in ("pos", "choice", "note", "flag"):
        for value in HOSTILE_VALUES:
            if field == "note" and len(value) < 4000 and value not in ("\ud800",):
                continue  # a short note is a note
            cases.append([(k, v) for k, v in base if k != field] + [(field, _quoted(value))])
    cases += [
        base + [("pos", good["pos"])],  # repeated keys
        base + [("choice", "2")],
        base + [("csrf", good["csrf"])],
        base + [("note", "a"), ("note", "b")],
        base + [("flag", "cut_off"), ("flag", "cut_off")],
        base + [("set", "pairwise")],  # fields the form does not have
        base + [("uid", "0")],
        base + [("t", "x")],
        base + [("note", "%ff%fe")],  # not UTF-8
        base + [("note", "y" * 4001)],
        [("csrf", good["csrf"]), ("pos", "99999"), ("choice", "1")],  # no such item
    ]
    for fields in cases:
        r = _post(client, fields)
        assert _one_line_400(r), (fields[-1][0], fields[-1][1][:40], r.status_code, r.text[:200])
    for body in (b"\xff\xfe=1", b"&&", b"csrf=" + good["csrf"].encode() + b"&pos=0&choice=1&\x00"):
        r = _post(client, body)
        assert _one_line_400(r), (body, r.status_code, r.text[:200])
    r = _post(client, [("csrf", "é" * 64), ("pos", good["pos"]), ("choice", "1")])
    assert r.status_code == 403  # not 500: hmac.compare_digest raises on non-ASCII str
    assert _one_line_400(client.get("/a/ann?t=a&t=b"))
    assert page.store.labels() == []
    assert _post(client, base + [("flag", "cut_off"), ("note", "ok")]).status_code == 303
    assert [(lb.flags, lb.note) for lb in page.store.labels()] == [(("cut_off",), "ok")]


def test_random_forms_get_a_label_or_one_line_of_400(tmp_path):
    """A seeded fuzz over every field: any mix of good and hostile values, repeats and strays."""
    page, _ = _session(tmp_path, small_release(tmp_path / "rel", per_cell=2))
    client = _client(page)
    good = _form(client.get("/a/ann").text)
    rng = random.Random(37)
    values = {
        "csrf": [good["csrf"]] * 6 + ["", "é", "0" * 64],
        "pos": [good["pos"]] * 4 + ["1", "3", "0"] + HOSTILE_VALUES,
        "choice": ["1", "2", "tie", "skip", "3", "Tie"] + HOSTILE_VALUES,
        "flag": ["cut_off", "not_english", "wrong_scenario"] + HOSTILE_VALUES,
        "note": ["", "fine", "x" * 4000] + HOSTILE_VALUES,
        "set": ["pairwise"],
        "uid": ["0"],
    }
    for _ in range(300):
        fields = [(k, _quoted(rng.choice(v))) for k, v in values.items() for _ in range(rng.choice((0, 1, 1, 1, 2)))]
        rng.shuffle(fields)
        r = _post(client, fields, query=rng.choice(("", "", "?t=x", "?t=1&t=2")))
        assert r.status_code in (303, 403) or _one_line_400(r), (fields, r.status_code, r.text[:300])


@pytest.mark.parametrize(
    "host,status",
    [
        ("127.0.0.1:8765", 200),
        ("127.0.0.2:8765", 200),
        ("127.255.255.254", 200),
        ("localhost:8765", 200),
        ("LOCALHOST", 200),
        ("[::1]:8765", 200),
        ("rebound.example:8765", 400),
        ("128.0.0.1:8765", 400),
        ("[::2]:8765", 400),
        ("localhost.evil.example", 400),
        ("[::1", 400),
        ("", 400),
    ],
)
def test_every_loopback_address_is_loopback_and_no_other_host(tmp_path, host, status):
    page, _ = _session(tmp_path, small_release(tmp_path / "rel"))
    assert _client(page).get("/a/ann", headers={"host": host}).status_code == status


def test_is_loopback():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "example.org", "", "127.1"))


def test_long_texts_render_one_at_a_time_and_are_kept(monkeypatch):
    """A second request for a long text waits for the first render (hundreds of MB each) and gets it kept."""
    from rmb_build.review import render

    real = render._markdown()
    calls: list[int] = []
    second: list[threading.Thread] = []
    text = table(render.SHOWN_CHARS + 1000)

    class Counted:
        def render(self, source):
            calls.append(len(source))
            if len(calls) == 1:  # while the first render runs, a second asks for the same text
                second.append(threading.Thread(target=render.markdown_html, args=(text,)))
                second[0].start()
                second[0].join(2)
                assert second[0].is_alive(), "the second render did not wait for the first"
            return real.render(source)

    render._long.cache_clear()
    monkeypatch.setattr(render, "_markdown", lambda: Counted())
    html = render.markdown_html(text)
    second[0].join(30)
    assert calls == [len(text)] and "<td>LAST-ROW</td>" in html
    render._long.cache_clear()
