"""Crash = pause: SIGKILL the host at the moments that matter, restart, lose nothing.

After a restart on the same data directory every unfinished run continues from its
last committed step: no node runs twice, no event is written twice, a delay keeps only
its remaining time, a gate still waits with the same interrupt.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from backends import Hosts
from harness import HostProcess, wait_until

SLOW = {
    "id": "slow-steps",
    "name": "Slow steps",
    "version": "1.0.0",
    "nodes": [
        {
            "id": "a",
            "typeId": "core.identity",
            "name": "A",
            "position": {"x": 0, "y": 0},
            "config": {},
            "inputs": {"payload": {"type": "variable", "variableName": "prompt"}},
        },
        {
            "id": "b",
            "typeId": "core.delay",
            "name": "B",
            "position": {"x": 1, "y": 0},
            "config": {"delayMs": 3000},
            "inputs": {},
        },
        {"id": "c", "typeId": "core.noop", "name": "C", "position": {"x": 2, "y": 0}, "config": {}, "inputs": {}},
    ],
    "edges": [
        {"id": "e1", "sourceNodeId": "a", "targetNodeId": "b"},
        {"id": "e2", "sourceNodeId": "b", "targetNodeId": "c"},
    ],
    "triggers": [{"id": "manual", "type": "manual"}],
    "variables": [{"name": "prompt", "type": "string"}],
    "metadata": {},
    "settings": {},
}

TIMED_GATE = {
    "id": "timed-gate",
    "name": "Timed gate",
    "version": "1.0.0",
    "nodes": [
        {
            "id": "gate",
            "typeId": "core.approvalGate",
            "name": "Gate",
            "position": {"x": 0, "y": 0},
            "config": {
                "title": "Decide within 4 s",
                "actions": ["accept", "reject"],
                "timeoutMs": 4000,
                "onTimeout": "approve",
            },
            "inputs": {},
        }
    ],
    "edges": [],
    "triggers": [{"id": "manual", "type": "manual"}],
    "variables": [],
    "metadata": {},
    "settings": {},
}


@pytest.fixture
def crash_host(start_process: Hosts[HostProcess], tmp_path: Path) -> HostProcess:
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "slow-steps.json").write_text(json.dumps(SLOW))
    (folder / "timed-gate.json").write_text(json.dumps(TIMED_GATE))
    host = start_process("--workflows", str(folder))
    return host


def _events(host: HostProcess, key: str, run_id: str) -> list[dict[str, Any]]:
    return host.http(key).get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"]


def _run(host: HostProcess, key: str, run_id: str) -> dict[str, Any]:
    return host.http(key).get(f"/v1/runs/{run_id}").json()


def _assert_log_is_clean(events: list[dict[str, Any]]) -> None:
    assert [e["sequence"] for e in events] == list(range(len(events))), "sequences are gap-free and unique"
    assert len({e["eventId"] for e in events}) == len(events)
    kinds = Counter(e["type"] for e in events)
    assert kinds["run.started"] == 1
    started = Counter(e["nodeId"] for e in events if e["type"] == "node.started")
    completed = Counter(e["nodeId"] for e in events if e["type"] == "node.completed")
    assert all(n == 1 for n in started.values()), f"a node started twice: {started}"
    assert all(n == 1 for n in completed.values()), f"a node completed twice: {completed}"
    terminal = [e for e in events if e["type"] in ("run.completed", "run.failed", "run.cancelled")]
    assert len(terminal) == 1 and terminal[0] is events[-1]


def test_kill_during_delay_resumes_with_remaining_time(crash_host: HostProcess) -> None:
    host = crash_host
    key = host.dev_key
    assert key
    run_id = (
        host.http(key).post("/v1/runs", json={"workflowId": "slow-steps", "inputs": {"prompt": "p"}}).json()["runId"]
    )
    wait_until(
        lambda: _run(host, key, run_id)["nodeStates"].get("b", {}).get("status") == "running", what="delay b to start"
    )
    wake_at = _run(host, key, run_id)["nodeStates"]["b"]["wakeAt"]
    host.kill()
    host.start()
    assert "resumed 1 unfinished run" in host.startups[-1]
    wait_until(
        lambda: _run(host, key, run_id)["status"] == "completed", timeout=20, what="the run to complete after restart"
    )
    events = _events(host, key, run_id)
    _assert_log_is_clean(events)
    b_done = next(e for e in events if e["type"] == "node.completed" and e["nodeId"] == "b")
    assert b_done["timestamp"] >= wake_at, "the delay was not cut short by the crash"
    b_started = next(e for e in events if e["type"] == "node.started" and e["nodeId"] == "b")
    assert b_started["payload"]["wakeAt"] == wake_at, "the deadline recorded before the crash is the one honoured"


def test_kill_at_gate_keeps_the_interrupt(crash_host: HostProcess) -> None:
    host = crash_host
    key = host.dev_key
    assert key
    run_id = (
        host.http(key)
        .post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "p"}})
        .json()["runId"]
    )
    wait_until(lambda: _run(host, key, run_id)["status"] == "waiting-approval", what="the gate")
    before = _run(host, key, run_id)["interrupt"]
    host.kill()
    host.start()
    after = _run(host, key, run_id)
    assert after["status"] == "waiting-approval"
    assert after["interrupt"]["interruptId"] == before["interruptId"]
    assert after["interrupt"]["data"] == before["data"]
    token = after["interrupt"]["interruptToken"]
    response = host.http().post(f"/v1/interrupts/{token}", json={"resumeValue": {"action": "accept"}})
    assert response.status_code == 200, response.text
    wait_until(lambda: _run(host, key, run_id)["status"] == "completed", what="completion after approval")
    _assert_log_is_clean(_events(host, key, run_id))


def test_gate_deadline_survives_a_crash(crash_host: HostProcess) -> None:
    host = crash_host
    key = host.dev_key
    assert key
    run_id = host.http(key).post("/v1/runs", json={"workflowId": "timed-gate"}).json()["runId"]
    wait_until(lambda: _run(host, key, run_id)["status"] == "waiting-approval", what="the gate")
    host.kill()
    host.start()
    wait_until(lambda: _run(host, key, run_id)["status"] == "failed", timeout=20, what="the timeout to reject the gate")
    run = _run(host, key, run_id)
    assert run["error"]["code"] == "approval_rejected"
    events = _events(host, key, run_id)
    received = [e for e in events if e["type"] == "approval.received"]
    assert [e["payload"]["action"] for e in received] == ["timeout"], (
        "a timeout never grants, even with onTimeout approve"
    )
    _assert_log_is_clean(events)


def test_kill_with_many_runs_in_flight(crash_host: HostProcess) -> None:
    host = crash_host
    key = host.dev_key
    assert key
    ids = [
        host.http(key).post("/v1/runs", json={"workflowId": "slow-steps", "inputs": {"prompt": str(i)}}).json()["runId"]
        for i in range(20)
    ]
    gated = [
        host.http(key)
        .post("/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": str(i)}})
        .json()["runId"]
        for i in range(5)
    ]
    host.kill()
    host.start()
    for run_id in gated:
        wait_until(lambda r=run_id: _run(host, key, r)["status"] == "waiting-approval", what=f"{run_id} at its gate")
        assert (
            host.http(key)
            .post(f"/v1/runs/{run_id}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
            .status_code
            == 200
        )
    for run_id in ids + gated:
        wait_until(
            lambda r=run_id: _run(host, key, r)["status"] == "completed", timeout=30, what=f"{run_id} to complete"
        )
        _assert_log_is_clean(_events(host, key, run_id))
