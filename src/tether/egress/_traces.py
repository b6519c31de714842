"""Traces of outbound deliveries: each attempt a client span in the trace of the run it reports on.

Used only while traces are on (``tether.tracing``). A run's ``traceparent`` (kept in its
``run.started`` event) never changes, so it is read once per run and remembered for the
runs delivered to lately; the span names the destination by host and port alone, never
its path, its query or a credential, and its status carries no error text for the same
reason (an error may quote the URL).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import httpx

from tether import tracing
from tether.caches import holds_copies
from tether.store.base import DeliveryRow, Store

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["DeliveryTraces"]

#: runs whose trace is remembered
_RUNS_KEPT = 1024


@holds_copies("_runs")
class DeliveryTraces:
    """Starts and ends the client span of each delivery attempt."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: run id -> its ``traceparent`` (None: it keeps none, or is gone), most recent last
        self._runs: OrderedDict[str, str | None] = OrderedDict()

    async def _trace_of(self, run_id: str) -> str | None:
        if run_id in self._runs:
            self._runs.move_to_end(run_id)
            return self._runs[run_id]
        try:
            run = await self.store.get_run(run_id)
        except Exception:  # noqa: BLE001 - a trace is not worth a delivery: this one starts a trace of its own
            return None
        trace = run.state.get("traceparent") if run is not None else None
        self._runs[run_id] = trace if isinstance(trace, str) else None
        if len(self._runs) > _RUNS_KEPT:
            self._runs.popitem(last=False)
        return self._runs[run_id]

    async def start(self, row: DeliveryRow) -> Span:
        """The span of one attempt at ``row``, started now; send ``tracing.span_traceparent`` of it."""
        url = httpx.URL(row.url)
        attributes = {
            "tether.delivery.kind": row.kind,
            "tether.delivery.id": row.delivery_id,
            "tether.delivery.attempt": row.attempts + 1,
            "tether.run_id": row.run_id,
            "http.request.method": "POST",
            "server.address": url.host,
            "server.port": url.port or (443 if url.scheme == "https" else 80),
        }
        return tracing.client_span(f"deliver {row.kind}", await self._trace_of(row.run_id), attributes)

    @staticmethod
    def finish(span: Span, outcome: str, status: int | None) -> None:
        """End the attempt's span: its outcome (delivered, retry, dead) and the status the receiver answered."""
        span.set_attribute("tether.delivery.outcome", outcome)
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if outcome != "delivered":
            tracing.failed(span)
        span.end()
