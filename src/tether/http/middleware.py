"""ASGI middleware: body size limit, ``Date`` and the W3C ``traceparent`` echo."""

from __future__ import annotations

import re
import time
from email.utils import formatdate

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.exchange import note_traceparent

_TRACEPARENT = re.compile(rb"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


JSONRPC_PATHS = ("/v1/a2a",)


class BodyTooLarge(Exception):
    """A streamed body passed the limit after the app began reading it."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than this host's limit of {limit} bytes")
        self.limit = limit


def too_large_body(path: str, limit: int) -> bytes:
    """The 413 body: a JSON-RPC error on the A2A endpoint, the REST envelope elsewhere."""
    message = f"the request body is larger than this host's limit of {limit} bytes"
    if path in JSONRPC_PATHS:
        return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}})
    return orjson.dumps({"error": "payload_too_large", "message": message, "details": {"maxBodyBytes": limit}})


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413 before the app reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def _refuse(self, scope: Scope, send: Send) -> None:
        body = too_large_body(scope["path"], self.limit)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.limit:
                    await self._refuse(scope, send)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, send)


def well_formed_traceparent(value: bytes) -> bytes | None:
    """The ``traceparent`` header value to echo, or None when it is not well formed."""
    value = value.strip()
    return value if _TRACEPARENT.match(value) else None


_date_second = 0
_date_value = b""


def http_date() -> bytes:
    """The ``Date`` header value for now (formatted at most once a second)."""
    global _date_second, _date_value
    second = int(time.time())
    if second != _date_second:
        _date_second = second
        _date_value = formatdate(second, usegmt=True).encode()
    return _date_value


class TraceparentEcho:
    """Return a well-formed incoming ``traceparent`` on the response, for correlation."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope["headers"] if k == b"traceparent"), None)
        trace = None if raw is None else well_formed_traceparent(raw)
        if trace is None:
            await self.app(scope, receive, send)
            return
        note_traceparent(trace.decode())

        async def echo(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"traceparent", trace)]}
            await send(message)

        await self.app(scope, receive, echo)


class DateHeader:
    """Stamp every response with ``Date`` (computed at most once a second, on demand)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def stamp(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"date", http_date())]}
            await send(message)

        await self.app(scope, receive, stamp)
