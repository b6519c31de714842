"""The guarded transport against a real HTTPS receiver on loopback with a private (trustme) CA."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
import trustme

from tether.egress.guard import EgressGuard, EgressPolicy, EgressRefused, PinnedTarget
from tether.egress.transport import (
    EgressResponseTooLarge,
    GuardedTransport,
    _PinnedBackend,
    build_egress_client,
    make_ssl_context,
)
from tether.errors import InvalidInput

BIG = 1024 * 1024


# --------------------------------------------------------------------------- the receiver


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What the loopback HTTPS receiver saw: TCP connections, SNI names and requests."""

    port: int = 0
    connections: int = 0
    sni: list[str | None] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.receiver.requests.append(
            Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )

    def _reply(
        self, status: int, body: bytes = b"", headers: Iterable[tuple[str, str]] = (), length: bool = True
    ) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        self._record()
        port = self.server.receiver.port
        if self.path == "/redirect":
            self._reply(302, headers=[("Location", f"https://receiver.test:{port}/target")])
        elif self.path == "/big":
            self._reply(200, b"x" * BIG)
        elif self.path == "/big-unannounced":
            self._reply(200, b"y" * BIG, length=False)  # HTTP/1.0: the body ends when the connection does
        elif self.path == "/gzip":
            self._reply(200, gzip.compress(b"z" * BIG), headers=[("Content-Encoding", "gzip")])
        elif self.path == "/slow":
            time.sleep(1.0)
            self._reply(200, b"late")
        elif self.path == "/slow-body":
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.flush()
            time.sleep(1.0)
            self.wfile.write(b"0123456789")
        else:
            self._reply(200, b"ok")


class _KeepAliveHandler(_Handler):
    """HTTP/1.1: the connection stays open after each answer, so a client can reuse it."""

    protocol_version = "HTTP/1.1"


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, receiver: Receiver, context: ssl.SSLContext, handler: type[_Handler] = _Handler) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.receiver = receiver
        self.context = context

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        self.receiver.connections += 1
        sock.settimeout(5)
        try:
            return self.context.wrap_socket(sock, server_side=True), address
        except BaseException:
            sock.close()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that give up early (caps, timeouts) are expected here


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_bundle(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "egress-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def _serve(ca: trustme.CA, handler: type[_Handler]) -> Iterator[Receiver]:
    state = Receiver()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("receiver.test", "other.test", "localhost").configure_cert(context)  # no IP in it

    def remember_sni(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None, ctx: ssl.SSLContext) -> None:
        state.sni.append(name)

    context.sni_callback = remember_sni
    server = _Server(state, context, handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def receiver(ca: trustme.CA) -> Iterator[Receiver]:
    """An HTTP/1.0 receiver: it closes every connection after its answer."""
    yield from _serve(ca, _Handler)


@pytest.fixture
def keepalive(ca: trustme.CA) -> Iterator[Receiver]:
    """An HTTP/1.1 receiver that keeps connections open."""
    yield from _serve(ca, _KeepAliveHandler)


# --------------------------------------------------------------------------- guard pieces


class CountingResolver:
    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return list(self.answers[host])


class RecordingBackend(httpcore.AsyncNetworkBackend):
    """The real anyio backend, remembering which hosts were dialled."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.dialled: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialled.append(host)
        return await self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@pytest.fixture
def resolver() -> CountingResolver:
    return CountingResolver({"receiver.test": ["127.0.0.1"]})


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()


@pytest.fixture
async def client(
    resolver: CountingResolver, ca_bundle: Path, backend: RecordingBackend
) -> AsyncIterator[httpx.AsyncClient]:
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(
        guard, make_ssl_context(ca_bundle), total_timeout=5.0, network_backend=backend
    ) as egress:
        yield egress


def url(receiver: Receiver, path: str, host: str = "receiver.test") -> str:
    return f"https://{host}:{receiver.port}{path}"


# --------------------------------------------------------------------------- tests


async def test_a_post_reaches_the_checked_address_with_the_original_name(
    client: httpx.AsyncClient, receiver: Receiver, resolver: CountingResolver, backend: RecordingBackend
) -> None:
    response = await client.post(
        url(receiver, "/push"), content=b'{"hello":1}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200
    assert response.content == b"ok"
    [request] = receiver.requests
    assert (request.method, request.path, request.body) == ("POST", "/push", b'{"hello":1}')
    assert request.headers["host"] == f"receiver.test:{receiver.port}"
    assert request.headers["accept-encoding"] == "identity"
    assert receiver.sni == ["receiver.test"]
    assert backend.dialled == ["127.0.0.1"]  # the pinned address, never the name
    assert resolver.calls == ["receiver.test"]


async def test_the_certificate_verifies_only_against_the_name(
    ca_bundle: Path, receiver: Receiver, backend: RecordingBackend
) -> None:
    # Same receiver by IP literal: the certificate names receiver.test and localhost only.
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), CountingResolver({}))
    async with build_egress_client(guard, make_ssl_context(ca_bundle), network_backend=backend) as egress:
        with pytest.raises(httpx.ConnectError) as caught:
            await egress.post(url(receiver, "/push", host="127.0.0.1"))
    assert isinstance(caught.value.__cause__, httpcore.ConnectError)
    assert receiver.requests == []


async def test_without_the_ca_bundle_the_private_certificate_is_not_trusted(
    receiver: Receiver, resolver: CountingResolver
) -> None:
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard) as egress:
        with pytest.raises(httpx.ConnectError):
            await egress.post(url(receiver, "/push"))
    assert receiver.requests == []


async def test_the_resolver_is_called_once_per_request(
    client: httpx.AsyncClient, receiver: Receiver, resolver: CountingResolver, backend: RecordingBackend
) -> None:
    for _ in range(3):
        assert (await client.post(url(receiver, "/push"), content=b"x")).status_code == 200
    assert resolver.calls == ["receiver.test"] * 3
    assert backend.dialled == ["127.0.0.1"] * 3


async def test_a_redirect_is_returned_not_followed(client: httpx.AsyncClient, receiver: Receiver) -> None:
    response = await client.post(url(receiver, "/redirect"), content=b"x")
    assert response.status_code == 302
    assert response.headers["location"].endswith("/target")
    assert receiver.paths() == ["/redirect"]

    # Even a per-request follow_redirects=True cannot reach the redirect target.
    with pytest.raises(httpx.TooManyRedirects):
        await client.post(url(receiver, "/redirect"), content=b"x", follow_redirects=True)
    assert "/target" not in receiver.paths()


async def test_an_oversized_response_is_capped(client: httpx.AsyncClient, receiver: Receiver) -> None:
    with pytest.raises(EgressResponseTooLarge, match="egress cap"):
        await client.get(url(receiver, "/big"))
    with pytest.raises(EgressResponseTooLarge, match="exceeds the egress cap of 65536 bytes"):
        await client.get(url(receiver, "/big-unannounced"))

    # Streaming: the status is available, the body is not.
    async with client.stream("GET", url(receiver, "/big")) as response:
        assert response.status_code == 200
        with pytest.raises(EgressResponseTooLarge):
            await response.aread()


async def test_a_compressed_response_is_refused(client: httpx.AsyncClient, receiver: Receiver) -> None:
    with pytest.raises(httpx.DecodingError, match="Content-Encoding 'gzip'"):
        await client.get(url(receiver, "/gzip"))


async def test_the_whole_exchange_is_time_capped(
    resolver: CountingResolver, ca_bundle: Path, receiver: Receiver
) -> None:
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle), total_timeout=0.3) as egress:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException, match="total time limit"):
            await egress.get(url(receiver, "/slow"))
        with pytest.raises(httpx.ReadTimeout, match="total time limit"):
            await egress.get(url(receiver, "/slow-body"))
        assert time.monotonic() - started < 1.5


@pytest.mark.parametrize(
    ("target", "arm"),
    [
        ("https://receiver.test:{port}/push", "address"),  # resolves to 127.0.0.1, not allowed here
        ("https://127.0.0.1:{port}/push", "address"),
        ("https://localhost:{port}/push", "address"),
        ("http://receiver.test:{port}/push", "scheme"),
    ],
)
async def test_without_the_allow_cidr_nothing_connects(
    resolver: CountingResolver, ca_bundle: Path, receiver: Receiver, backend: RecordingBackend, target: str, arm: str
) -> None:
    guard = EgressGuard(EgressPolicy(), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle), network_backend=backend) as egress:
        with pytest.raises(EgressRefused) as caught:
            await egress.post(target.format(port=receiver.port), content=b"x")
    assert caught.value.arm == arm
    assert receiver.connections == 0
    assert backend.dialled == []


async def test_the_allow_cidr_does_not_open_plain_http(client: httpx.AsyncClient, receiver: Receiver) -> None:
    with pytest.raises(EgressRefused) as caught:
        await client.post(f"http://127.0.0.1:{receiver.port}/push", content=b"x")
    assert caught.value.arm == "scheme"
    assert receiver.connections == 0


async def test_the_next_checked_address_is_tried_when_one_refuses(
    ca_bundle: Path, receiver: Receiver, backend: RecordingBackend
) -> None:
    resolver = CountingResolver({"receiver.test": ["127.0.0.2", "127.0.0.1"]})  # nothing listens on .2
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.0/8"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle), network_backend=backend) as egress:
        assert (await egress.post(url(receiver, "/push"), content=b"x")).status_code == 200
    assert backend.dialled == ["127.0.0.2", "127.0.0.1"]
    assert receiver.sni == ["receiver.test"]


async def test_an_ipv6_literal_is_dialled_as_is(ca_bundle: Path, backend: RecordingBackend) -> None:
    port = _free_port()
    guard = EgressGuard(EgressPolicy(allow_cidrs=["::1/128"]), CountingResolver({}))
    async with build_egress_client(guard, make_ssl_context(ca_bundle), network_backend=backend) as egress:
        with pytest.raises(httpx.ConnectError):
            await egress.get(f"https://[::1]:{port}/")
    assert backend.dialled == ["::1"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_caller_cannot_choose_the_host_header(client: httpx.AsyncClient, receiver: Receiver) -> None:
    await client.post(url(receiver, "/push"), content=b"x", headers={"Host": "evil.example"})
    assert receiver.requests[0].headers["host"] == f"receiver.test:{receiver.port}"


async def test_environment_proxies_are_ignored(
    monkeypatch: pytest.MonkeyPatch, resolver: CountingResolver, ca_bundle: Path, receiver: Receiver
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle)) as egress:
        assert (await egress.post(url(receiver, "/push"), content=b"x")).status_code == 200


async def test_a_rebinding_name_is_refused_at_the_next_request(ca_bundle: Path, receiver: Receiver) -> None:
    resolver = CountingResolver({"receiver.test": ["127.0.0.1"]})
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle)) as egress:
        assert (await egress.post(url(receiver, "/push"), content=b"x")).status_code == 200
        resolver.answers["receiver.test"] = ["127.0.0.1", "10.0.0.1"]
        with pytest.raises(EgressRefused, match="receiver.test resolves to 10.0.0.1, a private address"):
            await egress.post(url(receiver, "/push"), content=b"x")
    assert receiver.connections == 1


async def test_connections_to_a_destination_are_reused(
    client: httpx.AsyncClient, keepalive: Receiver, resolver: CountingResolver, backend: RecordingBackend
) -> None:
    for _ in range(20):
        assert (await client.post(url(keepalive, "/push"), content=b"x")).status_code == 200
    answers = await asyncio.gather(*(client.post(url(keepalive, "/push"), content=b"x") for _ in range(20)))
    assert {r.status_code for r in answers} == {200}
    assert len(keepalive.requests) == 40
    # the first request's connection served the sequential ones; the concurrent ones opened a few more
    assert 1 <= keepalive.connections <= 20
    assert len(resolver.calls) == keepalive.connections == len(backend.dialled)  # one check per new connection


async def test_pools_are_never_shared_across_destinations(
    ca_bundle: Path, keepalive: Receiver, backend: RecordingBackend
) -> None:
    resolver = CountingResolver({"receiver.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle), network_backend=backend) as egress:
        for host in ("receiver.test", "other.test", "receiver.test", "other.test"):
            assert (await egress.post(url(keepalive, "/push", host=host), content=b"x")).status_code == 200
    assert keepalive.connections == 2
    assert keepalive.sni == ["receiver.test", "other.test"]
    assert [r.headers["host"].split(":")[0] for r in keepalive.requests] == ["receiver.test", "other.test"] * 2


async def test_a_redirect_is_not_followed_on_a_reused_connection(
    client: httpx.AsyncClient, keepalive: Receiver
) -> None:
    assert (await client.post(url(keepalive, "/push"), content=b"x")).status_code == 200
    response = await client.post(url(keepalive, "/redirect"), content=b"x")
    assert response.status_code == 302
    with pytest.raises(httpx.TooManyRedirects):
        await client.post(url(keepalive, "/redirect"), content=b"x", follow_redirects=True)
    assert keepalive.paths() == ["/push", "/redirect", "/redirect"]
    assert keepalive.connections == 1  # all three went over the one kept-alive connection


async def test_a_rebinding_name_is_refused_on_a_new_connection(ca_bundle: Path, keepalive: Receiver) -> None:
    resolver = CountingResolver({"receiver.test": ["127.0.0.1"]})
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle)) as egress:
        assert (await egress.post(url(keepalive, "/push"), content=b"x")).status_code == 200
        resolver.answers["receiver.test"] = ["10.0.0.1"]
        # two at once: one takes the idle connection (still pinned to the address checked when it
        # was opened), the other needs a new connection, and its fresh lookup is refused
        reused, fresh = await asyncio.gather(
            egress.post(url(keepalive, "/push"), content=b"x"),
            egress.post(url(keepalive, "/push"), content=b"x"),
            return_exceptions=True,
        )
    assert isinstance(reused, httpx.Response) and reused.status_code == 200
    assert isinstance(fresh, EgressRefused) and "resolves to 10.0.0.1, a private address" in str(fresh)
    assert resolver.calls == ["receiver.test", "receiver.test"]
    assert keepalive.connections == 1


async def test_the_url_arms_hold_on_a_reused_connection(ca_bundle: Path, keepalive: Receiver) -> None:
    resolver = CountingResolver({"receiver.test": ["127.0.0.1"]})
    guard = EgressGuard(EgressPolicy(allow_cidrs=["127.0.0.1/32"]), resolver)
    async with build_egress_client(guard, make_ssl_context(ca_bundle)) as egress:
        assert (await egress.post(url(keepalive, "/push"), content=b"x")).status_code == 200
        with pytest.raises(EgressRefused, match="only https"):
            await egress.post(f"http://receiver.test:{keepalive.port}/push", content=b"x")
    assert keepalive.paths() == ["/push"]


async def test_the_transport_lifecycle(resolver: CountingResolver) -> None:
    transport = GuardedTransport(EgressGuard(EgressPolicy(), resolver))
    await transport.aclose()
    await transport.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await transport.handle_async_request(httpx.Request("GET", "https://receiver.test/"))
    assert resolver.calls == []


async def test_the_pinned_backend_dials_nothing_but_its_target() -> None:
    target = PinnedTarget(
        url="https://a.example/", host="a.example", port=443, addresses=(ipaddress.ip_address("93.184.216.34"),)
    )
    backend = RecordingBackend()
    pinned = _PinnedBackend(target, backend)
    with pytest.raises(httpcore.ConnectError, match="refusing to connect to b.example:443"):
        await pinned.connect_tcp("b.example", 443)
    with pytest.raises(httpcore.ConnectError, match="refusing"):
        await pinned.connect_tcp("a.example", 8443)
    with pytest.raises(httpcore.ConnectError, match="Unix socket"):
        await pinned.connect_unix_socket("/run/docker.sock")
    assert backend.dialled == []


def test_make_ssl_context(ca_bundle: Path, tmp_path: Path) -> None:
    context = make_ssl_context(ca_bundle)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    missing = tmp_path / "missing.pem"
    with pytest.raises(InvalidInput, match="--egress-ca-bundle"):
        make_ssl_context(missing)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(InvalidInput, match="--egress-ca-bundle"):
        make_ssl_context(garbage)
