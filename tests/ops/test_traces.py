"""OpenTelemetry traces, received by an OTLP/HTTP collector on loopback and decoded with
``opentelemetry-proto`` (the collector protocol's own messages).

Real ``tether serve`` processes, configured only by the standard ``OTEL_*`` variables: an
inbound ``traceparent`` is continued; a run's spans stay in its trace after a SIGKILL and a
restart; a hand-off from one Tether host to another shows as one trace; and each outbox
delivery is a client span of its run's trace, whose ``traceparent`` the receiver gets.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from harness import HostProcess, wait_until
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage
from receiver import Receiver, egress_to

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{CALLER_SPAN}-01"


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    run_id: str  # the tether.run_id attribute, if any
    kind: int = 0  # SpanMessage.SpanKind
    attributes: tuple[tuple[str, str], ...] = ()  # every attribute, its value as text
    status: int = 0  # Status.StatusCode


class Collector:
    """Takes ``POST /v1/traces`` (OTLP protobuf) and keeps every span."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.keep(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def keep(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                with self._lock:
                    self.spans.extend(
                        Span(
                            service,
                            s.name,
                            s.trace_id.hex(),
                            s.span_id.hex(),
                            s.parent_span_id.hex(),
                            next((a.value.string_value for a in s.attributes if a.key == "tether.run_id"), ""),
                            s.kind,
                            tuple((a.key, _text(a.value)) for a in s.attributes),
                            s.status.code,
                        )
                        for s in scope_spans.spans
                    )

    def named(self, name: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _text(value: object) -> str:
    """An OTLP AnyValue as text, whichever of its fields is set."""
    field = value.WhichOneof("value")  # type: ignore[attr-defined]
    return "" if field is None else str(getattr(value, field))


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    received = Collector()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", received.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # ms: spans leave in batches, soon
    yield received
    received.close()


def test_an_inbound_trace_is_continued_and_a_run_keeps_its_trace_across_a_sigkill(
    tmp_path: Path, collector: Collector
) -> None:
    host = HostProcess(tmp_path / "data").start()
    try:
        http = host.http(host.dev_key)
        created = http.post(
            "/v1/runs",
            json={"workflowId": "approval-gated", "inputs": {"prompt": "x"}},
            headers={"traceparent": TRACEPARENT},
        )
        run_id = created.json()["runId"]
        [request] = wait_until(lambda: collector.named("POST /v1/runs"), what="the request's span")
        assert (request.trace_id, request.parent_id, request.service) == (TRACE, CALLER_SPAN, "tether")
        waiting = wait_until(lambda: collector.named("run waiting-approval"), what="the run's spans")
        assert {s.trace_id for s in waiting} == {TRACE}
        assert {s.trace_id for s in collector.named("store.commit")} >= {TRACE}

        host.kill()  # SIGKILL: the run is resumed by the next start, in the same trace
        host.start()
        http = host.http(host.dev_key)
        node = http.get(f"/v1/runs/{run_id}").json()["interrupt"]["nodeId"]
        approved = http.post(f"/v1/runs/{run_id}/interrupts/{node}", json={"resumeValue": {"action": "accept"}})
        assert approved.status_code == 200
        completed = wait_until(lambda: collector.named("run completed"), what="the resumed run's spans")
        assert {s.trace_id for s in completed} == {TRACE}
        assert any(s.name.startswith("node ") and s.trace_id == TRACE for s in collector.spans)
        answer = [s for s in collector.named("POST /v1/runs/{run_id}/interrupts/{node_id}")]
        assert answer and answer[0].trace_id != TRACE  # the approving request is a trace of its own
    finally:
        host.kill()
        host.close_clients()


def test_a_handoff_between_two_tether_hosts_is_one_trace(tmp_path: Path, collector: Collector) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "a2a"))
    from handoff_hosts import Pair, outputs_of, start, until_status
    from workflow_docs import node, workflow_doc

    def workflows(b_url: str) -> list[dict[str, object]]:
        prompt = {"prompt": {"type": "variable", "variableName": "prompt"}}
        peer = node("peer", "vendor.tether.a2a-handoff", config={"agent": b_url, "skill": "echo"}, inputs=prompt)
        return [workflow_doc("hand-echo", [peer], [], [{"name": "prompt", "type": "string", "required": False}])]

    pair = Pair(tmp_path, workflows)
    try:
        with pair.a_http() as a:
            run_id = start(a, "hand-echo", {"prompt": "hello"})
            done = until_status(a, run_id, "completed", "failed")
            assert done["status"] == "completed", done
            task_id = outputs_of(done)["taskId"]

        def finished(run: str) -> list[Span]:
            return [s for s in collector.named("run completed") if s.run_id == run]

        [on_a] = wait_until(lambda: finished(run_id), what="A's run span")
        [on_b] = wait_until(lambda: finished(task_id), what="B's run span")
        assert on_a.trace_id == on_b.trace_id  # one trace: A's run, its request to B, B's run
        outbound = [s for s in collector.spans if s.name.startswith("A2A ") and s.trace_id == on_a.trace_id]
        assert outbound, "A's requests to B are spans of the run's trace"
        b_requests = [
            s for s in collector.spans if s.trace_id == on_a.trace_id and s.parent_id in {o.span_id for o in outbound}
        ]
        assert b_requests, "B's request spans are children of A's outbound spans"
    finally:
        pair.close()


def test_a_delivery_is_a_client_span_of_its_runs_trace_and_the_receiver_gets_its_traceparent(
    tmp_path: Path, collector: Collector, receiver: Receiver
) -> None:
    host = HostProcess(tmp_path / "data", *egress_to(receiver)).start()
    try:
        http = host.http(host.dev_key)
        hook_url = receiver.url("/hook?token=never-in-a-span")
        hook = {"url": hook_url, "events": ["run.completed"], "secret": "s" * 32}
        assert http.post("/v1/webhooks", json=hook).status_code == 201
        created = http.post(
            "/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}, headers={"traceparent": TRACEPARENT}
        )
        run_id = created.json()["runId"]
        [received] = wait_until(lambda: receiver.requests, what="the webhook delivery")
        sent = received.headers.get("traceparent", "")
        assert sent.startswith(f"00-{TRACE}-"), f"the delivery continues the run's trace: {sent!r}"
        [span] = wait_until(lambda: collector.named("deliver webhook"), what="the delivery's span")
        assert (span.trace_id, span.run_id, span.kind) == (TRACE, run_id, SpanMessage.SPAN_KIND_CLIENT)
        assert sent.split("-")[2] == span.span_id, "the receiver's parent is the delivery's span"
        attributes = dict(span.attributes)
        assert attributes["tether.delivery.kind"] == "webhook"
        assert attributes["tether.delivery.attempt"] == "1"
        assert attributes["tether.delivery.outcome"] == "delivered"
        assert attributes["http.response.status_code"] == "204"
        assert (attributes["server.address"], attributes["server.port"]) == ("127.0.0.1", str(receiver.port))
        shown = " ".join(v for _, v in span.attributes)
        assert "never-in-a-span" not in shown and "/hook" not in shown and "s" * 32 not in shown

        # an A2A push (the task waits for approval) goes the same way
        message = {"kind": "message", "role": "user", "messageId": "m-push", "parts": [{"kind": "text", "text": "x"}]}
        send = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {**message, "metadata": {"skillId": "approval-gated"}},
                "configuration": {"pushNotificationConfig": {"url": receiver.url("/push"), "token": "tok-secret"}},
            },
        }
        task = http.post("/v1/a2a", json=send, headers={"traceparent": TRACEPARENT}).json()["result"]
        assert task["status"]["state"] == "input-required"
        [pushed] = wait_until(lambda: [r for r in receiver.requests if r.path == "/push"], what="the push")
        [push_span] = wait_until(lambda: collector.named("deliver a2a-push"), what="the push's span")
        assert (push_span.trace_id, push_span.run_id, push_span.kind) == (TRACE, task["id"], span.kind)
        assert pushed.headers["traceparent"] == f"00-{TRACE}-{push_span.span_id}-01"
        assert "tok-secret" not in " ".join(v for _, v in push_span.attributes)
    finally:
        host.kill()
        host.close_clients()


def test_a_failed_delivery_attempt_is_a_failed_span_with_the_status_the_receiver_gave(
    tmp_path: Path, collector: Collector, receiver: Receiver
) -> None:
    receiver.script = [503, 204]
    host = HostProcess(tmp_path / "data", *egress_to(receiver), "--push-retry-schedule", "100ms").start()
    try:
        http = host.http(host.dev_key)
        hook = {"url": receiver.url("/hook"), "events": ["run.completed"], "secret": "s" * 32}
        assert http.post("/v1/webhooks", json=hook).status_code == 201
        http.post(
            "/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}, headers={"traceparent": TRACEPARENT}
        )
        spans = wait_until(lambda: len(collector.named("deliver webhook")) == 2 and collector.named("deliver webhook"))
        first, second = sorted(spans, key=lambda s: dict(s.attributes)["tether.delivery.attempt"])
        assert dict(first.attributes)["tether.delivery.outcome"] == "retry"
        assert dict(first.attributes)["http.response.status_code"] == "503"
        assert first.status == 2  # STATUS_CODE_ERROR
        assert dict(second.attributes)["tether.delivery.outcome"] == "delivered" and second.status != 2
        assert {first.trace_id, second.trace_id} == {TRACE}
        assert [r.headers["traceparent"].split("-")[2] for r in receiver.requests] == [first.span_id, second.span_id]
    finally:
        host.kill()
        host.close_clients()
