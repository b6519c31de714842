"""OpenTelemetry traces: off unless the standard ``OTEL_*`` variables ask for them.

Each run belongs to one trace. A run created by a request that carried a W3C
``traceparent`` joins the caller's trace; any other run starts its own. The run keeps
that ``traceparent`` in its ``run.started`` event, so every span of the run, on any host
and after any restart, and every request of a hand-off to a peer (its ``traceparent``
header), continue the same trace: two Tether hosts in a hand-off show as one trace.

Turned on by ``OTEL_TRACES_EXPORTER=otlp`` or an ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``
(``OTEL_SDK_DISABLED=true`` wins), exporting OTLP over HTTP in batches; the SDK reads the
rest of its settings (service name, sampler, batch delays) from the same variables. Off,
the only cost is a check of one global.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "client_span",
    "enabled_by",
    "failed",
    "instant",
    "new_traceparent",
    "outbound",
    "parent",
    "request_span",
    "set_up",
    "shut_down",
    "span",
    "span_traceparent",
    "tracer",
]

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")

_provider: TracerProvider | None = None
_tracer: Tracer | None = None


def enabled_by(environ: Mapping[str, str]) -> bool:
    """Whether these environment variables ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER")
    if exporter is not None:
        return "otlp" in {e.strip().lower() for e in exporter.split(",")}
    return bool(environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def set_up(environ: Mapping[str, str] = os.environ) -> bool:
    """Start exporting spans if the environment asks for it (once per process); whether it does."""
    global _provider, _tracer
    if _tracer is not None or not enabled_by(environ):
        return _tracer is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tether import __version__

    resource = Resource.create(
        {"service.name": environ.get("OTEL_SERVICE_NAME", "tether"), "service.version": __version__}
    )
    _provider = TracerProvider(resource=resource)
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _tracer = _provider.get_tracer("tether", __version__)
    return True


def shut_down() -> None:
    """Export what is left (a graceful stop loses no span)."""
    global _provider, _tracer
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def tracer() -> Tracer | None:
    """The tracer, or None when traces are off."""
    return _tracer


def parent(traceparent: str | None) -> Context | None:
    """The context a span continues from a remembered ``traceparent`` (None: a new trace)."""
    if traceparent is None or _TRACEPARENT.fullmatch(traceparent) is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


@contextlib.contextmanager
def span(name: str, traceparent: str | None, attributes: dict[str, Any]) -> Iterator[Span | None]:
    """A span named ``name`` under the current span, else under ``traceparent``; nothing when traces are off."""
    if _tracer is None:
        yield None
        return
    from opentelemetry import trace

    context = None if trace.get_current_span().get_span_context().is_valid else parent(traceparent)
    with _tracer.start_as_current_span(name, context=context, attributes=attributes) as current:
        yield current


@contextlib.contextmanager
def request_span(headers: list[tuple[bytes, bytes]]) -> Iterator[Span]:
    """The server span of one inbound request (traces on), continuing its ``traceparent`` header."""
    assert _tracer is not None
    from opentelemetry.trace import SpanKind

    raw = next((value for name, value in headers if name == b"traceparent"), None)
    context = parent(raw.decode("latin-1").strip()) if raw is not None else None
    with _tracer.start_as_current_span("request", context=context, kind=SpanKind.SERVER) as current:
        yield current


def instant(name: str, traceparent: str | None, attributes: dict[str, Any], start_ns: int | None = None) -> None:
    """A span already over (from ``start_ns``, or a moment), under the run trace ``traceparent``."""
    if _tracer is None:
        return
    done = _tracer.start_span(name, context=parent(traceparent), attributes=attributes, start_time=start_ns)
    done.end()


def client_span(name: str, traceparent: str | None, attributes: dict[str, Any]) -> Span:
    """A client span (traces on) started now in the run trace ``traceparent``, for a request whose
    outcome is known only once it is answered: the caller sets what it learns and ends it."""
    assert _tracer is not None
    from opentelemetry.trace import SpanKind

    return _tracer.start_span(name, context=parent(traceparent), kind=SpanKind.CLIENT, attributes=attributes)


def failed(current: Span) -> None:
    """Mark ``current`` as failed (no description: what went wrong may name a URL or a credential)."""
    from opentelemetry.trace import Status, StatusCode

    current.set_status(Status(StatusCode.ERROR))


def outbound(traceparent: str, name: str) -> str:
    """The ``traceparent`` of one outbound request continuing the trace ``traceparent``.

    Traces on: a client span of that trace, ended as the request goes (its header carries the
    span's own id and sampling). Off: the same trace and flags with a fresh span id.
    """
    if _tracer is None:
        match = _TRACEPARENT.fullmatch(traceparent)
        trace, flags = (match.group(1), match.group(3)) if match else (secrets.token_hex(16), "00")
        return f"00-{trace}-{secrets.token_hex(8)}-{flags}"
    from opentelemetry.trace import SpanKind

    request = _tracer.start_span(name, context=parent(traceparent), kind=SpanKind.CLIENT)
    request.end()
    return span_traceparent(request)


def span_traceparent(current: Span) -> str:
    """The ``traceparent`` that makes a request a child of ``current``."""
    context = current.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def new_traceparent(trace_id: str | None = None) -> str:
    """A sampled ``traceparent`` in trace ``trace_id`` (a new trace when None) with a fresh span id."""
    return f"00-{trace_id or secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
