"""One structured log line and one metrics sample per request, taken in front of everything.

What it records is bounded and harmless: the method, the route's template (never the
raw path: an interrupt token travels in one), the JSON-RPC method or A2A operation, the
status, the duration and the principal (``tenant/name``); never a header, a key, a
token or a body. The per-request work is a context variable, two clock reads, a few
additions (``Requests``) and, when enabled, a line filled into its cached shape.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether import tracing
from tether.exchange import CURRENT, Exchange

if TYPE_CHECKING:
    from tether.ops.logs import InfoLines, Shape
    from tether.ops.metrics import Metrics

__all__ = ["Observed", "route_of"]

log = logging.getLogger("tether.request")

_A2A = "/v1/a2a"
_A2A_REST = "/v1/a2a/rest/"
_STREAM = b"text/event-stream"
#: the request span when traces are off: none
_UNTRACED = contextlib.nullcontext()


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
        #: the formatted request lines, by everything in them but the duration (a bounded set, see route_of)
        self._shapes: dict[tuple[str, str, str | None, int, str | None], Shape] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        exchange = Exchange()
        token = CURRENT.set(exchange)
        answered: list[int] = []  # the status, once the response starts
        stream = False

        async def sending(message: Message) -> None:
            nonlocal stream
            if not answered and message["type"] == "http.response.start":
                answered.append(message["status"])
                for name, value in message["headers"]:
                    if name == b"content-type" and value.startswith(_STREAM):
                        stream = True
                        if self.metrics is not None:
                            self.metrics.stream_opened(route_of(scope)[0])
            await send(message)

        traced = tracing.request_span(scope["headers"]) if tracing.tracer() is not None else _UNTRACED
        with traced as span:
            if span is not None:
                exchange.traceparent = tracing.span_traceparent(span)  # what a run it starts continues
            try:
                await self.app(scope, receive, sending)
            finally:
                CURRENT.reset(token)
                status = answered[0] if answered else 500
                self._record(scope, exchange, status, stream, time.perf_counter() - started)
                if span is not None:
                    span.update_name(exchange.operation or f"{scope['method']} {route_of(scope)[1]}")
                    span.set_attribute("http.response.status_code", status)

    def _record(self, scope: Scope, exchange: Exchange, status: int, stream: bool, elapsed: float) -> None:
        """``status`` is what the caller saw (500 if the app ended without answering)."""
        surface, route = route_of(scope)
        if self.metrics is not None:
            self.metrics.request(surface, exchange.operation or f"{scope['method']} {route}", status, elapsed)
            if stream:
                self.metrics.stream_closed(surface)
        if self.lines is not None:
            key = (scope["method"], route, exchange.operation, status, exchange.principal)
            shape = self._shapes.get(key)
            if shape is None:
                if len(self._shapes) >= _SHAPES_KEPT:
                    self._shapes.clear()
                shape = self._shapes[key] = self.lines.shape(log.name, "request", _fields(*key), "duration_ms")
            self.lines.emit_shaped(shape, round(elapsed * 1000, 2))
        elif log.isEnabledFor(logging.INFO):
            fields = _fields(scope["method"], route, exchange.operation, status, exchange.principal)
            log.info("request", extra={"fields": {**fields, "duration_ms": round(elapsed * 1000, 2)}})


#: request-line shapes kept before starting over (method × route × operation × status × principal)
_SHAPES_KEPT = 4096


def _fields(method: str, route: str, operation: str | None, status: int, principal: str | None) -> dict[str, object]:
    return {"method": method, "path": route, "operation": operation, "status": status, "principal": principal}
