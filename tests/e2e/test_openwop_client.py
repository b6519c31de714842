"""The published ``openwop-client==1.8.0`` drives a real host through a run's whole life."""

from __future__ import annotations

import threading

import pytest
from harness import Host, wait_until
from openwop_client import OpenwopClient
from openwop_client.errors import WopError
from openwop_client.types import CancelRunRequest, CreateRunRequest, ResolveInterruptRequest
from schemas import openwop_validator


@pytest.fixture
def client(host: Host, key: str) -> OpenwopClient:
    return OpenwopClient(host.url, key)


def _wait_status(client: OpenwopClient, run_id: str, status: str) -> None:
    wait_until(lambda: client.runs_get(run_id).status == status, what=f"run {run_id} to be {status}")


def test_discovery_is_public_and_valid(client: OpenwopClient, host: Host) -> None:
    caps = client.discovery_capabilities()
    assert caps.protocolVersion.startswith("1.")
    doc = host.http().get("/.well-known/openwop").json()
    openwop_validator("capabilities").validate(doc)
    assert "capabilities" not in doc, "families live at the document root"
    assert client.discovery_openapi()["paths"]["/v1/runs"]


def test_echo_run_streams_to_completion(client: OpenwopClient) -> None:
    created = client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": "hello"}))
    assert created.status in ("pending", "running")
    events = list(client.runs_events(created.runId, stream_mode="debug"))
    types = [e.type for e in events]
    assert types[0] == "run.started" and types[-1] == "run.completed"
    assert [e.sequence for e in events] == list(range(len(events)))
    assert events[-1].payload["outputs"] == {"payload": "hello"}
    validator = openwop_validator("run-event")
    for event in events:
        validator.validate({k: v for k, v in event.__dict__.items() if v is not None})
    snapshot = client.runs_get(created.runId)
    assert snapshot.status == "completed"
    assert snapshot.variables is not None and snapshot.variables["payload"] == "hello"
    assert client.workflows_get("echo")["id"] == "echo"


def test_approval_resolved_through_the_client(client: OpenwopClient) -> None:
    created = client.runs_create(CreateRunRequest(workflowId="approval-gated", inputs={"prompt": "draft 1"}))
    _wait_status(client, created.runId, "waiting-approval")
    snapshot = client.runs_get(created.runId)
    assert snapshot.currentNodeId == "gate"
    resolved = client.interrupts_resolve_by_run(
        created.runId, "gate", ResolveInterruptRequest(resumeValue={"action": "accept", "feedback": "ship it"})
    )
    assert resolved.nodeId == "gate"
    events = list(client.runs_events(created.runId, stream_mode="debug"))
    received = [e for e in events if e.type == "approval.received"]
    assert len(received) == 1 and received[0].payload["decidedBy"] == "key:dev"
    assert events[-1].type == "run.completed"
    states = client.runs_get(created.runId).nodeStates or {}
    assert states["publish"]["status"] == "completed" and states["on-reject"]["status"] == "skipped"


def test_refine_needs_feedback_and_token_resolution(client: OpenwopClient, host: Host, key: str) -> None:
    created = client.runs_create(CreateRunRequest(workflowId="approval-gated", inputs={"prompt": "draft"}))
    _wait_status(client, created.runId, "waiting-approval")
    with pytest.raises(WopError) as refused:
        client.interrupts_resolve_by_run(
            created.runId, "gate", ResolveInterruptRequest(resumeValue={"action": "refine"})
        )
    assert refused.value.status == 400
    token = host.http(key).get(f"/v1/runs/{created.runId}").json()["interrupt"]["interruptToken"]
    inspected = client.interrupts_inspect_by_token(token)
    assert inspected.kind == "approval" and inspected.data["title"] == "Approve the draft"
    client.interrupts_resolve_by_token(token, ResolveInterruptRequest(resumeValue={"action": "reject"}))
    with pytest.raises(WopError) as used:
        client.interrupts_resolve_by_token(token, ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert used.value.status == 409
    _wait_status(client, created.runId, "completed")
    assert (client.runs_get(created.runId).nodeStates or {})["on-reject"]["status"] == "completed"


def test_clarification_answers_as_list(client: OpenwopClient) -> None:
    created = client.runs_create(CreateRunRequest(workflowId="clarification-gated"))
    _wait_status(client, created.runId, "waiting-input")
    client.interrupts_resolve_by_run(
        created.runId, "ask", ResolveInterruptRequest(resumeValue={"answers": [{"id": "q1", "answer": "blue"}]})
    )
    events = list(client.runs_events(created.runId, stream_mode="debug"))
    resolved = [e for e in events if e.type == "clarification.resolved"]
    assert resolved[0].payload["answers"] == {"q1": "blue"}
    assert events[-1].type == "run.completed"
    assert events[-1].payload["outputs"] == {"color": "blue"}


def test_poll_returns_everything_then_completes(client: OpenwopClient) -> None:
    created = client.runs_create(CreateRunRequest(workflowId="multi-step", inputs={"prompt": "p"}))
    seen = []
    last = None
    while True:
        page = client.runs_poll_events(created.runId, last_sequence=last, timeout_seconds=10)
        seen.extend(page.events)
        if page.events:
            last = page.events[-1].sequence
        if page.isComplete:
            break
    assert [e.sequence for e in seen] == list(range(len(seen)))
    assert seen[-1].type == "run.completed"
    after_end = client.runs_poll_events(created.runId, last_sequence=last + 10, timeout_seconds=1)
    assert after_end.events == []


def test_cancel_waiting_and_running_runs(client: OpenwopClient) -> None:
    waiting = client.runs_create(CreateRunRequest(workflowId="approval-gated", inputs={"prompt": "x"}))
    _wait_status(client, waiting.runId, "waiting-approval")
    assert client.runs_cancel(waiting.runId, CancelRunRequest(reason="no longer needed")).status == "cancelled"
    with pytest.raises(WopError) as gone:
        client.interrupts_resolve_by_run(
            waiting.runId, "gate", ResolveInterruptRequest(resumeValue={"action": "accept"})
        )
    assert gone.value.status == 422

    running = client.runs_create(CreateRunRequest(workflowId="multi-step", inputs={"prompt": "x"}))
    wait_until(
        lambda: (client.runs_get(running.runId).nodeStates or {}).get("b", {}).get("status") == "running",
        what="the delay to start",
    )
    assert client.runs_cancel(running.runId).status in ("cancelling", "cancelled")
    events = list(client.runs_events(running.runId, stream_mode="debug"))
    assert events[-1].type == "run.cancelled"
    assert "c" not in (client.runs_get(running.runId).nodeStates or {})
    assert client.runs_cancel(running.runId).status == "cancelled"  # idempotent

    done = client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": "x"}))
    _wait_status(client, done.runId, "completed")
    with pytest.raises(WopError) as terminal:
        client.runs_cancel(done.runId)
    assert terminal.value.status == 409 and terminal.value.envelope and terminal.value.envelope.error == "run_terminal"


@pytest.mark.fresh_host  # lists every echo run of the tenant
def test_idempotent_create(client: OpenwopClient, host: Host, key: str) -> None:
    request = CreateRunRequest(workflowId="echo", inputs={"prompt": "once"})
    first = client.runs_create(request, idempotency_key="order-42")
    second = client.runs_create(request, idempotency_key="order-42")
    assert first.runId == second.runId
    replay = host.http(key).post(
        "/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "once"}}, headers={"Idempotency-Key": "order-42"}
    )
    assert replay.headers["openwop-Idempotent-Replay"] == "true"
    with pytest.raises(WopError) as mismatch:
        client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": "twice"}), idempotency_key="order-42")
    assert (
        mismatch.value.status == 409
        and mismatch.value.envelope
        and mismatch.value.envelope.error == "idempotency_key_mismatch"
    )
    runs = host.http(key).get("/v1/runs", params={"workflowId": "echo"}).json()["runs"]
    assert [r["runId"] for r in runs] == [first.runId]


@pytest.mark.fresh_host  # counts every run of the tenant
def test_concurrent_idempotent_creates_make_one_run(host: Host, key: str) -> None:
    results: list[str] = []

    def create() -> None:
        with host.client(key) as http:
            response = http.post(
                "/v1/runs",
                json={"workflowId": "echo", "inputs": {"prompt": "race"}},
                headers={"Idempotency-Key": "race-1"},
            )
            assert response.status_code == 201
            results.append(response.json()["runId"])

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and len(set(results)) == 1
    runs = host.http(key).get("/v1/runs").json()["runs"]
    assert len(runs) == 1


def test_concurrent_resolves_one_wins(host: Host, key: str, client: OpenwopClient) -> None:
    created = client.runs_create(CreateRunRequest(workflowId="approval-gated", inputs={"prompt": "x"}))
    _wait_status(client, created.runId, "waiting-approval")
    codes: list[int] = []
    barrier = threading.Barrier(2)

    def resolve() -> None:
        with host.client(key) as http:
            barrier.wait()
            codes.append(
                http.post(
                    f"/v1/runs/{created.runId}/interrupts/gate", json={"resumeValue": {"action": "accept"}}
                ).status_code
            )

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200, 409]
    events = host.http(key).get(f"/v1/runs/{created.runId}/events/poll", params={"timeout": 0}).json()["events"]
    assert sum(1 for e in events if e["type"] == "approval.received") == 1
