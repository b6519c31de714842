"""The host keeps an idle HTTP connection open longer than the client pools that call it.

A client pool reuses a connection it believes open. If the host closes that connection just
as a request goes out on it, the request is reset, and the caller cannot tell whether it
arrived. httpx, the transport of a2a-sdk and openwop-client, drops a connection after 5 s
idle, and the host used to close one after 5 s idle too (uvicorn's default). Under a
sustained load the two raced now and then; the benchmark's outbox leg lost a request to that
race. The host now waits ``--idle-timeout`` seconds (75 by default), so the pools close first.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import httpx
from backends import Hosts
from harness import wait_until
from inproc import InProcessHost

from tether.cli.serve import serve_settings

_REQUEST = b"GET /healthz HTTP/1.1\r\nhost: tether\r\n\r\n"


def _connect(url: str) -> socket.socket:
    """A kept-alive connection to the host at ``url`` that has carried one request."""
    address = urlsplit(url)
    assert address.hostname is not None and address.port is not None
    sock = socket.create_connection((address.hostname, address.port), timeout=10)
    _ask(sock)
    return sock


def _ask(sock: socket.socket) -> None:
    """One ``GET /healthz`` on ``sock``, its whole answer read."""
    sock.sendall(_REQUEST)
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, f"the host closed the connection mid-answer: {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = int(lengths[0])
    while len(body) < length:
        body += sock.recv(4096)


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end has closed ``sock`` (without reading anything it sent)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def test_the_default_outlives_the_idle_expiry_of_httpx() -> None:
    """httpx's own default, read from the installed library, not copied here."""
    expiry = httpx.Limits().keepalive_expiry
    assert expiry is not None
    assert serve_settings([]).idle_timeout > expiry


def test_an_idle_connection_is_closed_after_idle_timeout_and_not_before(start_host: Hosts[InProcessHost]) -> None:
    brief = start_host("--idle-timeout", "1", name="brief")
    default = start_host(name="default")
    long = _connect(default.url)
    short = _connect(brief.url)
    idle_since = time.monotonic()
    try:
        wait_until(lambda: _closed_by_peer(short), timeout=15, what="the host to close the connection idle for 1 s")
        assert time.monotonic() - idle_since >= 0.9  # not before its time (the loop's clock may round down)
        assert not _closed_by_peer(long)
        _ask(long)  # the host with the default still serves the connection idle as long
    finally:
        short.close()
        long.close()
