"""The guarded httpx transport: every outbound request is re-checked and sent to the checked address.

`GuardedTransport` plugs into httpx's transport seam. Per request it

1. applies the guard's URL arms (`EgressGuard.check_url`: scheme, port, denied names; no DNS);
2. takes an idle keep-alive connection of that destination (host, port) if it has one: such a
   connection was dialled to an address the guard checked when it was opened, and stays
   pinned to it. Otherwise it runs `EgressGuard.resolve_and_check` (one DNS lookup, every
   answer checked) and opens a new httpcore connection whose network backend dials only the
   checked addresses, in order, while httpcore keeps using the original host name for TLS SNI
   and certificate verification; the Host header is the URL's authority — so no second
   lookup can happen between check and connect (DNS rebinding has nothing to slip through),
   and a name that now resolves to a refused address is refused at its next new connection;
3. returns the response as is — a 3xx is handed back, never followed, on a new connection or
   a reused one;
4. caps the response body (`max_response_bytes`) and the whole exchange (`total_timeout`).

Keep-alive is what lets the outbox keep up: a new TLS connection per delivery held it near
50 deliveries/s to one receiver. Idle connections are pooled per destination and never
handed to another; a connection goes back to its pool only when its response was read to
the end and the server kept it open.

`build_egress_client` is the one place an outbound client is made: redirects off (and
``max_redirects=0`` so a per-request ``follow_redirects=True`` cannot reach a redirect target),
environment proxies ignored.

httpcore errors are translated to the matching httpx errors (``raise … from exc``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpcore
import httpx

from tether.egress._asyncio_backend import AsyncioBackend
from tether.egress.guard import EgressGuard, PinnedTarget
from tether.errors import InvalidInput

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "EgressClient",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOTAL_TIMEOUT",
    "EgressResponseTooLarge",
    "GuardedTransport",
    "build_egress_client",
    "make_ssl_context",
]

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024
"""Response bodies longer than this fail the request."""

DEFAULT_TIMEOUT = httpx.Timeout(5.0)
"""Per-operation (connect, read, write) timeout of the egress client."""

DEFAULT_TOTAL_TIMEOUT = 10.0
"""Seconds from the start of a request (including DNS) to the end of its response body."""

DEFAULT_MAX_IDLE_PER_DESTINATION = 32
"""Idle keep-alive connections kept per destination; one more is closed when it comes back."""

DEFAULT_KEEPALIVE_EXPIRY = 4.0
"""Seconds an idle connection is kept: under the 5 s keep-alive of common servers (uvicorn,
nginx's 75 s is longer), so that a reused connection is rarely one the server is closing."""

#: a destination: (host as the guard normalised it, port); pools are never shared across them
_Destination = tuple[str, int]


class EgressResponseTooLarge(httpx.TransportError):
    """The receiver's response body is longer than the egress cap; the attempt failed."""


def make_ssl_context(ca_bundle: Path | None = None) -> ssl.SSLContext:
    """The TLS context of egress: the system's trust store, plus operator CAs for private receivers.

    Parameters:
        ca_bundle: a PEM file of extra trusted CAs (``--egress-ca-bundle``); development and
            tests only.

    Returns:
        A verifying client context (hostname checked, TLS 1.2 or later).

    Raises:
        InvalidInput: the bundle cannot be read or holds no usable certificate.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_bundle is not None:
        try:
            context.load_verify_locations(cafile=str(ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise InvalidInput(
                f"--egress-ca-bundle {str(ca_bundle)!r} cannot be loaded: {exc}", details={"caBundle": str(ca_bundle)}
            ) from exc
    return context


# Most specific first; the first match wins.
_HTTPCORE_TO_HTTPX: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _map_httpcore_exceptions(request: httpx.Request) -> Iterator[None]:
    """Re-raise an httpcore error as the matching httpx error, chained to the original."""
    try:
        yield
    except Exception as exc:
        for core_type, httpx_type in _HTTPCORE_TO_HTTPX:
            if isinstance(exc, core_type):
                raise httpx_type(str(exc) or type(exc).__name__, request=request) from exc
        raise


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """A network backend that dials only a pinned target's checked addresses, never a name."""

    def __init__(self, target: PinnedTarget, inner: httpcore.AsyncNetworkBackend) -> None:
        self._target = target
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if host != self._target.host or port != self._target.port:
            raise httpcore.ConnectError(
                f"egress pinned to {self._target.host}:{self._target.port}, refusing to connect to {host}:{port}"
            )
        options = list(socket_options) if socket_options is not None else None
        failure: Exception | None = None
        for address in self._target.addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout=timeout, local_address=local_address, socket_options=options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # a PinnedTarget always has at least one address
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("egress never connects to a Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedResponseStream(httpx.AsyncByteStream):
    """The response body, capped in size and time; closing it closes the connection."""

    def __init__(
        self,
        request: httpx.Request,
        response: httpcore.Response,
        connection: httpcore.AsyncHTTPConnection,
        *,
        limit: int,
        deadline: float,
        on_close: Callable[[], Awaitable[None]],
    ) -> None:
        self._request = request
        self._response = response
        self._connection = connection
        self._limit = limit
        self._deadline = deadline
        self._on_close = on_close
        self._closed = False

    def _content_length(self) -> int | None:
        for name, value in self._response.headers:
            if name.lower() == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    def _encoded(self) -> bytes | None:
        for name, value in self._response.headers:
            if name.lower() == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
                return value
        return None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        declared = self._content_length()
        if declared is not None and declared > self._limit and self._request.method != "HEAD":
            raise EgressResponseTooLarge(
                f"response declares {declared} bytes; the egress cap is {self._limit}", request=self._request
            )
        body = self._response.stream
        assert isinstance(body, AsyncIterable)
        chunks = body.__aiter__()
        encoding = self._encoded()
        received = 0
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    with _map_httpcore_exceptions(self._request):
                        chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise httpx.ReadTimeout("egress response exceeded the total time limit", request=self._request) from exc
            if not chunk:
                continue
            if encoding is not None:
                raise httpx.DecodingError(
                    f"response has Content-Encoding {encoding.decode('latin-1')!r}; egress asks for identity "
                    "so that the size cap holds",
                    request=self._request,
                )
            received += len(chunk)
            if received > self._limit:
                raise EgressResponseTooLarge(
                    f"response body exceeds the egress cap of {self._limit} bytes", request=self._request
                )
            yield chunk

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            with _map_httpcore_exceptions(self._request):
                await self._response.aclose()
        finally:
            await self._on_close()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that re-checks every request with the egress guard and connects only to checked addresses.

    Example::

        transport = GuardedTransport(EgressGuard(EgressPolicy()), ssl_context=make_ssl_context(None))
        async with httpx.AsyncClient(transport=transport, follow_redirects=False) as client: ...

    Prefer `build_egress_client`, which also turns redirects and environment proxies off.

    Parameters:
        guard: the egress guard; its resolver is the only DNS lookup of a request.
        ssl_context: TLS settings (default `make_ssl_context()` — system CAs).
        max_response_bytes: longest response body accepted; longer fails with
            `EgressResponseTooLarge`.
        total_timeout: seconds for the whole exchange, DNS to last body byte. Per-operation
            timeouts come from the client (``httpx.Timeout``).
        network_backend: the httpcore backend that actually dials (tests); default asyncio's own
            streams (``_asyncio_backend``: TLS in the loop's C code, not anyio's Python).
        max_idle_per_destination: idle keep-alive connections kept per destination.
        keepalive_expiry: seconds an idle connection is kept before it is closed.
    """

    def __init__(
        self,
        guard: EgressGuard,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
        max_idle_per_destination: int = DEFAULT_MAX_IDLE_PER_DESTINATION,
        keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
    ) -> None:
        if max_response_bytes < 0:
            raise ValueError("max_response_bytes must not be negative")
        if total_timeout <= 0:
            raise ValueError("total_timeout must be positive")
        self._guard = guard
        self._ssl_context = ssl_context if ssl_context is not None else make_ssl_context()
        self._max_response_bytes = max_response_bytes
        self._total_timeout = total_timeout
        self._backend = network_backend if network_backend is not None else AsyncioBackend()
        self._max_idle = max_idle_per_destination
        self._keepalive_expiry = keepalive_expiry
        self._connections: set[httpcore.AsyncHTTPConnection] = set()
        #: idle keep-alive connections by destination, the most recently used last
        self._idle: dict[_Destination, list[httpcore.AsyncHTTPConnection]] = {}
        self._closed = False

    @property
    def guard(self) -> EgressGuard:
        """The guard every request passes."""
        return self._guard

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Check, pin, connect and send one request; the response body stays capped while it is read.

        Raises:
            EgressRefused: the guard refused the URL or one of its addresses (nothing was sent).
            httpx.TransportError: connecting, TLS, sending or the time limit failed.
        """
        if self._closed:
            raise RuntimeError("the egress transport is closed")
        deadline = asyncio.get_running_loop().time() + self._total_timeout
        parsed = self._guard.check_url(request.url)  # the URL arms hold on every request, reused or not
        destination = (parsed.host, parsed.port)
        connection = await self._idle_connection(destination)
        if connection is None:
            connection = await self._new_connection(request, deadline)
        host = destination[0].encode("ascii")
        core_request = httpcore.Request(
            method=request.method.encode("ascii"),
            url=httpcore.URL(scheme=b"https", host=host, port=destination[1], target=request.url.raw_path),
            headers=self._headers_for(request),
            content=request.stream,
            extensions=self._extensions_for(request),
        )
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    with _map_httpcore_exceptions(request):
                        response = await connection.handle_async_request(core_request)
            except TimeoutError as exc:
                raise httpx.TimeoutException("egress request exceeded the total time limit", request=request) from exc
        except BaseException:
            await self._discard(connection)
            raise

        async def release() -> None:
            await self._release(destination, connection)

        stream = _GuardedResponseStream(
            request, response, connection, limit=self._max_response_bytes, deadline=deadline, on_close=release
        )
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )

    @staticmethod
    def _headers_for(request: httpx.Request) -> list[tuple[bytes, bytes]]:
        """The request's headers, with Host set to the URL's authority and identity encoding asked for."""
        dropped = {b"host", b"accept-encoding"}
        headers = [(b"Host", request.url.netloc)]
        headers += [(name, value) for name, value in request.headers.raw if name.lower() not in dropped]
        headers.append((b"Accept-Encoding", b"identity"))
        return headers

    @staticmethod
    def _extensions_for(request: httpx.Request) -> dict[str, Any]:
        """Only the per-operation timeouts pass to httpcore (no caller-chosen SNI)."""
        timeout: Mapping[str, Any] = request.extensions.get("timeout", DEFAULT_TIMEOUT.as_dict())
        return {"timeout": dict(timeout)}

    async def _new_connection(self, request: httpx.Request, deadline: float) -> httpcore.AsyncHTTPConnection:
        """Resolve and check the name now, and make a connection that can dial only what was checked."""
        try:
            async with asyncio.timeout_at(deadline):
                target = await self._guard.resolve_and_check(request.url)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout("egress name resolution exceeded the total time limit", request=request) from exc
        connection = httpcore.AsyncHTTPConnection(
            origin=httpcore.Origin(scheme=b"https", host=target.host.encode("ascii"), port=target.port),
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=_PinnedBackend(target, self._backend),
        )
        self._connections.add(connection)
        return connection

    async def _idle_connection(self, destination: _Destination) -> httpcore.AsyncHTTPConnection | None:
        """An idle connection of ``destination`` that is still usable; stale ones are closed on the way."""
        idle = self._idle.get(destination)
        while idle:
            connection = idle.pop()
            if connection.is_idle() and not connection.has_expired():
                return connection
            await self._discard(connection)
        return None

    async def _release(self, destination: _Destination, connection: httpcore.AsyncHTTPConnection) -> None:
        """Pool the connection of a finished exchange if the server kept it open, else close it."""
        idle = self._idle.setdefault(destination, [])
        if not self._closed and connection.is_idle() and len(idle) < self._max_idle:
            idle.append(connection)
        else:
            await self._discard(connection)

    async def _discard(self, connection: httpcore.AsyncHTTPConnection) -> None:
        self._connections.discard(connection)
        await connection.aclose()

    async def aclose(self) -> None:
        """Close every connection still open; safe to call more than once."""
        self._closed = True
        self._idle.clear()
        connections, self._connections = list(self._connections), set()
        for connection in connections:
            await connection.aclose()


class EgressClient(httpx.AsyncClient):
    """The egress client: an ``httpx.AsyncClient`` on a `GuardedTransport`, with a lean ``deliver``.

    ``deliver`` is what the outbox sends with: one request handed straight to the guarded
    transport and its body read, without the client's cookie jar, auth flow, redirect loop
    and per-request log line, none of which egress uses (it never follows a redirect and
    keeps no cookies). At the outbox's rate those were a third of the event loop's time.
    """

    def __init__(self, transport: GuardedTransport, *, timeout: httpx.Timeout, **kwargs: Any) -> None:
        super().__init__(transport=transport, timeout=timeout, **kwargs)
        self._guarded = transport
        self._extensions = {"timeout": timeout.as_dict()}

    async def deliver(self, url: str, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        """POST ``content`` to ``url`` through the guard; the response comes back read and closed.

        Raises what ``post`` raises: `EgressRefused`, or an ``httpx.TransportError``.
        """
        request = httpx.Request("POST", url, content=content, headers=headers, extensions=self._extensions)
        response = await self._guarded.handle_async_request(request)
        response.request = request
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response


def build_egress_client(
    guard: EgressGuard,
    ssl_context: ssl.SSLContext | None = None,
    *,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    headers: Mapping[str, str] | None = None,
    network_backend: httpcore.AsyncNetworkBackend | None = None,
) -> EgressClient:
    """The outbound HTTP client: guarded transport, no redirects, no environment proxies.

    Example::

        async with build_egress_client(guard, make_ssl_context(settings.egress_ca_bundle)) as client:
            response = await client.post(url, content=body)   # a 3xx comes back as is

    Parameters:
        guard: the egress guard every request passes.
        ssl_context: TLS settings (default `make_ssl_context()`).
        timeout: per-operation timeouts.
        total_timeout: seconds for a whole exchange, DNS to last body byte.
        max_response_bytes: longest response body accepted.
        headers: default headers (e.g. User-Agent).
        network_backend: the httpcore backend that dials (tests).

    Returns:
        An unopened `EgressClient` (an ``httpx.AsyncClient``); open it with ``async with``.
    """
    transport = GuardedTransport(
        guard,
        ssl_context=ssl_context,
        max_response_bytes=max_response_bytes,
        total_timeout=total_timeout,
        network_backend=network_backend,
    )
    return EgressClient(
        transport,
        follow_redirects=False,
        max_redirects=0,
        trust_env=False,
        timeout=timeout,
        headers=headers,
    )
