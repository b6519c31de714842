"""One structured log line and one metrics sample per request, taken in front of everything.

What it records is bounded and harmless: the method, the route's template (never the
raw path: an interrupt token travels in one), the JSON-RPC method or A2A operation, the
status, the duration and the principal (``tenant/name``); never a header, a key, a
token or a body. The per-request work is a context variable, two clock reads and, when
enabled, one log record.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.exchange import CURRENT, Exchange

if TYPE_CHECKING:
    from tether.ops.logs import InfoLines
    from tether.ops.metrics import Metrics

__all__ = ["Observed", "route_of"]

log = logging.getLogger("tether.request")

_A2A = "/v1/a2a"
_A2A_REST = "/v1/a2a/rest/"
_STREAM = b"text/event-stream"


def route_of(scope: Scope) -> tuple[str, str]:
    """The request's surface (``a2a`` or ``rest``) and route template, never a value from its path."""
    path: str = scope["path"]
    if path == _A2A:
        return "a2a", _A2A
    if path.startswith(_A2A_REST):
        return "a2a", "/v1/a2a/rest"
    template = getattr(scope.get("route"), "path", None)
    return "rest", template if isinstance(template, str) else "unmatched"


class Observed:
    """Logs and measures each HTTP request to ``app`` once it is answered (a stream, once it ends)."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None = None, lines: InfoLines | None = None) -> None:
        self.app = app
        self.metrics = metrics
        #: the fast writer ``tether serve`` set up; without one (an embedded host) lines go through ``logging``
        self.lines = lines

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        exchange = Exchange()
        token = CURRENT.set(exchange)
        status = 500  # what the caller saw if the app ended without answering
        stream = False

        async def sending(message: Message) -> None:
            nonlocal status, stream
            if message["type"] == "http.response.start":
                status = message["status"]
                stream = any(
                    name == b"content-type" and value.startswith(_STREAM) for name, value in message["headers"]
                )
                if stream and self.metrics is not None:
                    self.metrics.stream_opened(route_of(scope)[0])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            CURRENT.reset(token)
            elapsed = time.perf_counter() - started
            surface, route = route_of(scope)
            operation = exchange.operation or f"{scope['method']} {route}"
            if self.metrics is not None:
                self.metrics.request(surface, operation, status, elapsed)
                if stream:
                    self.metrics.stream_closed(surface)
            if self.lines is not None or log.isEnabledFor(logging.INFO):
                fields = {
                    "method": scope["method"],
                    "path": route,
                    "operation": exchange.operation,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                    "principal": exchange.principal,
                }
                if self.lines is not None:
                    self.lines.emit(log.name, "request", fields)
                else:
                    log.info("request", extra={"fields": fields})
