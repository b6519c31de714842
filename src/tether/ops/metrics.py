"""Prometheus metrics at ``GET /metrics``: what an operator graphs and alerts on.

Each host has its own registry (nothing global): counters move as work is done,
gauges that describe the store (runs by status, the outbox's queue) are read from it
when scraped. Every label has a bounded set of values: a surface, an operation the host
serves (or a route template), a status class, a workflow id of the host's catalogue, a
run status; never a run, task or delivery id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Receive, Scope, Send

from tether import clock, tracing
from tether.engine.handoff.record import in_flight
from tether.ops.logs import InfoLines
from tether.store.base import Commit, Store
from tether.types import RUN_STATUSES, TERMINAL, WAITING

__all__ = ["Metrics", "MetricsEndpoint", "Requests", "RunWatch"]

log = logging.getLogger("tether.run")

#: latency buckets from a cached read (~100 µs) to a long-poll or a blocking send (30 s)
_LATENCY: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: how long gates wait for people: seconds to days
_WAIT: Final = (1, 10, 60, 300, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 7 * 86400)
#: the longest a scrape waits for the store's gauges before serving the counters alone
_REFRESH_TIMEOUT: Final = 5.0
#: the most outbox rows a scrape counts per state (counting is a read of the store)
OUTBOX_COUNT_CAP: Final = 10_000


def _outcome(status: int) -> str:
    return "2xx" if status < 300 else "3xx" if status < 400 else "4xx" if status < 500 else "5xx"


class Metrics:
    """The host's registry and every metric in it."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Requests(_LATENCY)
        r.register(self.requests)
        self.open_streams = Gauge("tether_open_streams", "Event streams open now", ["surface"], registry=r)
        self.stream_fanout = Histogram(
            "tether_stream_fanout_seconds",
            "From a commit made here until every open stream of its run (A2A and REST) handed its frames to its writer",
            buckets=_LATENCY,
            registry=r,
        )
        self.runs_started = Counter("tether_runs_started", "Runs created", ["workflow"], registry=r)
        self.runs_finished = Counter(
            "tether_runs_finished", "Runs that ended, by how", ["workflow", "status"], registry=r
        )
        self.delivery_attempts = Counter(
            "tether_outbox_attempts",
            "Delivery attempts sent, by kind (a2a-push, webhook) and outcome (delivered, retry, dead)",
            ["kind", "outcome"],
            registry=r,
        )
        self.oldest_due = Gauge(
            "tether_outbox_oldest_due_age_seconds",
            "How long the most overdue pending delivery has been due (0: none is overdue; read at scrape)",
            registry=r,
        )
        self.handoffs_waiting = Gauge(
            "tether_handoffs_waiting",
            "Unfinished runs waiting on another agent: a hand-off in flight (read at scrape)",
            registry=r,
        )
        self.runs_taken_over = Counter(
            "tether_runs_taken_over",
            "Runs this host took over after their lease lapsed (several hosts: another one died or let go)",
            registry=r,
        )
        self.runs_purged = Counter(
            "tether_runs_purged", "Finished runs purged past the task-retention window", registry=r
        )
        self.events = Counter("tether_events_committed", "Run events committed to the store", registry=r)
        self.commit_seconds = Histogram(
            "tether_store_commit_duration_seconds",
            "Time for one transition to be durable",
            buckets=_LATENCY,
            registry=r,
        )
        self.group_size = Histogram(
            "tether_store_group_size",
            "Writes made durable together: per SQLite transaction (one fsync), per PostgreSQL grouped statement",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.interrupt_wait = Histogram(
            "tether_interrupt_wait_seconds",
            "How long a run waited at a gate before it was answered",
            buckets=_WAIT,
            registry=r,
        )
        self.runs = Gauge("tether_runs", "Runs not yet ended, by status (read at scrape)", ["status"], registry=r)
        self.outbox = Gauge(
            "tether_outbox_deliveries",
            f"Outbox rows by state (pending = queue depth, dead = dead letters; counted up to {OUTBOX_COUNT_CAP})",
            ["status"],
            registry=r,
        )

    def request(self, surface: str, operation: str, status: int, seconds: float) -> None:
        """One answered request."""
        self.requests.observe(surface, operation, status, seconds)

    def stream_opened(self, surface: str) -> None:
        self.open_streams.labels(surface).inc()

    def stream_closed(self, surface: str) -> None:
        self.open_streams.labels(surface).dec()

    def timed_commits(self, store: Store) -> None:
        """Time every ``store.commit`` of this host (the one write path of every transition)."""
        commit = store.commit
        observe = self.commit_seconds.observe

        async def timed(c: Commit) -> int:
            started = time.perf_counter()
            try:
                if tracing.tracer() is None:
                    return await commit(c)
                with tracing.span("store.commit", c.run.state.get("traceparent"), {"tether.run_id": c.run.run_id}):
                    return await commit(c)
            finally:
                observe(time.perf_counter() - started)

        setattr(store, "commit", timed)  # noqa: B010 - an instance attribute shadows the method
        store.on_group = self.group_size.observe

    def delivery_attempt(self, kind: str, outcome: str) -> None:
        self.delivery_attempts.labels(kind, outcome).inc()

    async def refresh(self, store: Store) -> None:
        """Read the gauges that describe the store: unfinished runs by status, hand-offs, the outbox."""
        counts = dict.fromkeys((s for s in RUN_STATUSES if s not in TERMINAL), 0)
        handing_off = 0
        for row in await store.active_runs():
            counts[row.status] = counts.get(row.status, 0) + 1
            handing_off += bool(in_flight(row.state))
        for status, count in counts.items():
            self.runs.labels(status).set(count)
        self.handoffs_waiting.set(handing_off)
        due = await store.next_delivery_at()
        self.oldest_due.set(max(0.0, (clock.now() - clock.parse(due)).total_seconds()) if due else 0.0)
        for state in ("pending", "dead"):
            rows = await store.list_deliveries(None, state, OUTBOX_COUNT_CAP)
            self.outbox.labels(state).set(len(rows))


class Requests(Collector):
    """Requests answered, by surface, operation and outcome, with their latency: kept as plain numbers.

    Every request passes here, so a request costs a dict lookup, a bisection and three
    additions, in the event loop's thread (no lock: scrapes are served there too); the
    Prometheus families ``tether_requests_total`` and ``tether_request_duration_seconds``
    are built from them only when scraped. (prometheus-client's own labelled counter and
    histogram take a lock per update: ~2.5 µs a request, measured.)
    """

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = buckets
        #: (surface, operation, status) -> [count, sum of seconds, count per bucket (the last: above every bound)]
        self._series: dict[tuple[str, str, int], list[Any]] = {}

    def observe(self, surface: str, operation: str, status: int, seconds: float) -> None:
        series = self._series.get((surface, operation, status))
        if series is None:
            series = self._series[(surface, operation, status)] = [0, 0.0, [0] * (len(self._bounds) + 1)]
        series[0] += 1
        series[1] += seconds
        series[2][bisect_left(self._bounds, seconds)] += 1

    def describe(self) -> list[Metric]:
        return list(self._families(()))

    def collect(self) -> list[Metric]:
        return list(self._families(list(self._series.items())))

    def _families(self, series: Any) -> Iterator[Metric]:
        answered = CounterMetricFamily(
            "tether_requests", "HTTP requests answered", labels=["surface", "operation", "outcome"]
        )
        latency = HistogramMetricFamily(
            "tether_request_duration_seconds",
            "Time to answer a request (a stream: until it ends)",
            labels=["surface", "operation"],
        )
        counts: dict[tuple[str, str, str], int] = {}
        merged: dict[tuple[str, str], list[Any]] = {}
        for (surface, operation, status), (count, total, buckets) in series:
            outcome = (surface, operation, _outcome(status))
            counts[outcome] = counts.get(outcome, 0) + count
            into = merged.setdefault((surface, operation), [0.0, [0] * len(buckets)])
            into[0] += total
            into[1] = [a + b for a, b in zip(into[1], buckets, strict=True)]
        for by_outcome, count in counts.items():
            answered.add_metric(list(by_outcome), count)
        bounds = [*(_bound(b) for b in self._bounds), "+Inf"]
        for by_operation, (total, buckets) in merged.items():
            latency.add_metric(list(by_operation), list(zip(bounds, accumulate(buckets), strict=True)), total)
        yield answered
        yield latency


def _bound(value: float) -> str:
    """A bucket bound as prometheus-client writes it (``0.5``, ``1.0``)."""
    return repr(float(value))


class RunWatch:
    """Learns of each durable commit: counts events, runs started and finished, gate waits; logs transitions.

    It remembers the last status of the runs this host has seen change (forgotten when
    they end), so a commit that leaves the status as it was is counted but not logged.
    """

    def __init__(self, metrics: Metrics | None, lines: InfoLines | None = None) -> None:
        self.metrics = metrics
        self.lines = lines
        self._last: dict[str, tuple[str, float]] = {}
        #: traces on: when each node in flight here started (ns), by run, for its span
        self._nodes: dict[str, dict[str, int]] = {}

    def committed(self, commit: Commit, enqueued: Any = None) -> None:
        run = commit.run
        now = time.monotonic()
        if tracing.tracer() is not None:
            self._trace(commit)
        before = self._last.get(run.run_id)
        if self.metrics is not None:
            self.metrics.events.inc(len(commit.events))
            if commit.expected_sequence is None:
                self.metrics.runs_started.labels(run.workflow_id).inc()
        if before is not None and before[0] == run.status:
            return
        if self.metrics is not None:
            if run.status in TERMINAL:
                self.metrics.runs_finished.labels(run.workflow_id, run.status).inc()
            if before is not None and before[0] in WAITING:
                self.metrics.interrupt_wait.observe(now - before[1])
        if run.status in TERMINAL:
            self._last.pop(run.run_id, None)
        else:
            self._last[run.run_id] = (run.status, now)
        if self.lines is not None or log.isEnabledFor(logging.INFO):
            fields = {
                "run_id": run.run_id,
                "workflow": run.workflow_id,
                "from": before[0] if before else None,
                "to": run.status,
                "sequence": run.last_sequence,
            }
            if self.lines is not None:
                self.lines.emit(log.name, "run", fields)
            else:
                log.info("run", extra={"fields": fields})

    def _trace(self, commit: Commit) -> None:
        """A span per node run here (from its start to its end) and per run status change, in the run's trace."""
        run = commit.run
        parent = run.state.get("traceparent")
        nodes = self._nodes.setdefault(run.run_id, {})
        for row in commit.events:
            doc = row.doc
            node = (doc.get("payload") or {}).get("nodeId")
            if node is None:
                continue
            if doc["type"] == "node.started":
                nodes[node] = time.time_ns()
            elif doc["type"] in _NODE_ENDS:
                tracing.instant(
                    f"node {node}",
                    parent,
                    {"tether.run_id": run.run_id, "tether.node.outcome": doc["type"]},
                    nodes.pop(node, None),
                )
        before = self._last.get(run.run_id)
        if before is None or before[0] != run.status:
            tracing.instant(
                f"run {run.status}", parent, {"tether.run_id": run.run_id, "tether.workflow": run.workflow_id}
            )
        if run.status in TERMINAL:
            self._nodes.pop(run.run_id, None)


#: the events that end a node's span
_NODE_ENDS = frozenset({"node.completed", "node.failed", "node.skipped", "node.cancelled", "node.suspended"})


class MetricsEndpoint:
    """Serves ``GET /metrics`` (the Prometheus text format) in front of ``app``; no key, like any exporter.

    With ``port`` (``--metrics-port``), metrics are served on that port alone, and that port
    serves nothing else: the API's port answers ``/metrics`` with 404, so metrics stay off the
    public listener without a proxy rule.
    """

    def __init__(
        self, app: ASGIApp, metrics: Metrics, store: Callable[[], Store | None], *, port: int | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self._store = store
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        on_metrics_port = self.port is not None and (scope.get("server") or ("", None))[1] == self.port
        if on_metrics_port and scope["path"] != "/metrics":
            await _send(send, 404, b"only /metrics is served on this port\n", [(b"content-type", b"text/plain")])
            return
        if scope["path"] != "/metrics" or (self.port is not None and not on_metrics_port):
            await self.app(scope, receive, send)  # with --metrics-port, the API's port has no /metrics
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, b"", [(b"allow", b"GET, HEAD")])
            return
        store = self._store()
        if store is not None:
            try:
                await asyncio.wait_for(self.metrics.refresh(store), _REFRESH_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - the counters are still worth serving
                log.warning("metrics: could not read runs and outbox gauges from the store: %s", exc)
        body = generate_latest(self.metrics.registry)
        await _send(
            send, 200, b"" if scope["method"] == "HEAD" else body, [(b"content-type", CONTENT_TYPE_LATEST.encode())]
        )


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [*headers, (b"cache-control", b"no-store")]}
    )
    await send({"type": "http.response.body", "body": body})
