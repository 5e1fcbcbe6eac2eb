"""The review server drops a request whose headers or body do not arrive in time, before anything checks who
sends it: idle, half-sent requests (unauthenticated) once held their descriptors for ever, until every
annotator was locked out. Served as ``rmb review serve`` serves it (``review/deadlines.server_config``)."""

from __future__ import annotations

import re
import socket
import threading
import time
from contextlib import contextmanager

import pytest
from review_helpers import small_release

import rmb_build.review.deadlines as deadlines
from rmb_build.release.read import read_rmb_release
from rmb_build.review.app import MAX_BODY, create_app
from rmb_build.review.session import Settings, open_session

LIMIT_S = 1.0


@pytest.fixture
def port(tmp_path, monkeypatch):
    monkeypatch.setattr(deadlines, "HEADER_S", LIMIT_S)
    monkeypatch.setattr(deadlines, "BODY_S", LIMIT_S)
    rel = read_rmb_release(small_release(tmp_path / "rel"))
    page, _ = open_session(str(tmp_path / "review.db"), rel, "rel", Settings(["ann"], None, 1.0, 0), require_token=True)
    with _serving(create_app(page)) as bound:
        yield bound


@contextmanager
def _serving(app):
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(deadlines.server_config(app, "127.0.0.1", 0, MAX_BODY, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            if server.started:
                break
            thread.join(0.05)
        assert server.started, "uvicorn did not start"
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _answer(s: socket.socket, wait_s: float = 15) -> bytes:
    """What the server sends until it closes the connection; fails if it still holds it after ``wait_s``."""
    s.settimeout(wait_s)
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except socket.timeout:
        pytest.fail(f"the server still held the connection after {wait_s}s (sent {got[:200]!r})")
    return got


def test_a_connection_that_never_finishes_its_headers_is_dropped(port):
    idle = socket.create_connection(("127.0.0.1", port))  # not a byte
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET /a/ann HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    with idle, half:
        assert _answer(idle) == b"" and _answer(half) == b""


def test_a_body_that_does_not_arrive_is_answered_408_before_the_token_is_checked(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            b"POST /a/ann/label HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no token: 403 once the body is in
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsrf=1"
        )
        assert _answer(s).startswith(b"HTTP/1.1 408 ")
    with socket.create_connection(("127.0.0.1", port)) as s:  # chunked, never ended
        s.sendall(
            b"POST /a/ann/label HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n\r\n4\r\ncsrf\r\n"
        )
        assert _answer(s).startswith(b"HTTP/1.1 408 ")


def test_whole_requests_are_served_and_a_kept_alive_connection_is_timed_again(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /a/ann HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.settimeout(15)
        first = b""
        while b"\r\n\r\n" not in first:
            first += s.recv(65536)
        head, _, body = first.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
        while len(body) < length:
            body += s.recv(65536)
        assert first.startswith(b"HTTP/1.1 403 ")  # no token: refused, once the request was whole
        time.sleep(LIMIT_S / 2)
        s.sendall(b"GET /a/ann HTTP/1.1\r\nHost: ")  # the next request's headers, never finished
        assert _answer(s) == b""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert _answer(s).startswith(b"HTTP/1.1 204 ")
