"""An httpcore network backend on asyncio's own streams, so TLS runs in the event loop's C code.

httpcore's default backend goes through anyio, whose TLS is Python: every read and write
of a delivery passed through ``ssl.SSLObject`` and a memory BIO in Python, inside anyio
cancel scopes. Profiled at the outbox's rate, that was a quarter of the event loop's time.
asyncio's transports do TLS below Python (uvloop in C); a timeout is one
``asyncio.timeout`` instead of a cancel scope.

Only the dialling changes: which address is dialled is still decided by the guard
(``transport._PinnedBackend`` wraps this backend), and httpcore still verifies the
certificate against the host name it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import ssl
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore

__all__ = ["AsyncioBackend"]

#: errors of a stream that is broken or closed under us: a read or write error, not a bug
_BROKEN = (OSError, EOFError, asyncio.IncompleteReadError, ssl.SSLError)


@contextlib.contextmanager
def _mapped(timeout_error: type[Exception], broken_error: type[Exception]) -> Iterator[None]:
    try:
        yield
    except TimeoutError as exc:
        raise timeout_error(str(exc) or "timed out") from exc
    except _BROKEN as exc:
        raise broken_error(str(exc) or type(exc).__name__) from exc


def _readable(sock: Any) -> bool:
    """Whether a kept-alive connection has something to read (or is gone): then it is not reused.

    An idle HTTP/1.1 connection has nothing to read; a byte or an EOF means the server spoke
    out of turn or closed it.
    """
    if sock is None or sock.fileno() == -1:
        return True
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


class _Stream(httpcore.AsyncNetworkStream):
    """One connection: asyncio's reader and writer, each operation under its own timeout."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()

    async def aclose(self) -> None:
        # At once, without TLS's close_notify: httpcore closes a connection only between
        # exchanges or after a failed one, and a graceful close would outlive it (a transport
        # still shutting down when the loop ends is left unclosed).
        self._writer.transport.abort()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
                async with asyncio.timeout(timeout):
                    await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except BaseException:
            self._writer.transport.abort()
            raise
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "is_readable":
            return _readable(self._writer.get_extra_info("socket"))
        if info in ("ssl_object", "socket"):
            return self._writer.get_extra_info(info)
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """TCP connections through the running loop (uvloop under ``tether serve``); Unix sockets are
    refused by the pinned backend in front of it (``transport._PinnedBackend``)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None
                )
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return _Stream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
