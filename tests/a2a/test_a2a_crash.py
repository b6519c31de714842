"""SIGKILL the host mid-task, restart it, and the task reads, streams and resumes from disk."""

from __future__ import annotations

import threading

import httpx
import pytest
from a2a_wire import (
    Frame,
    get_task,
    message,
    open_stream,
    run_events,
    send,
    stream,
    task_record,
    transitions,
    wait_state,
)
from harness import HostProcess, wait_until

pytestmark = pytest.mark.process  # SIGKILL


def _one_run_started(http: httpx.Client, task_id: str) -> None:
    started = [e for e in run_events(http, task_id) if e["type"] == "run.started"]
    assert len(started) == 1, started
    assert len(http.get("/v1/runs").json()["runs"]) == 1


def _approve_while_watching(host: HostProcess, key: str, task_id: str) -> list[Frame]:
    """Resubscribe, approve once the stream shows input-required, and collect the stream to its end."""
    seen: list[Frame] = []
    with host.client(key) as watcher, open_stream(watcher, "tasks/resubscribe", {"id": task_id}) as frames:
        for frame in frames:
            seen.append(frame)
            if frame.state == "input-required":
                with host.client(key) as approver:
                    record = task_record(approver, task_id)
                    assert record["state"] == "input-required" and record["interruptKind"] == "approval", (
                        "never a stale working"
                    )
                    send(approver, message(data={"action": "accept"}, task_id=task_id), blocking=False)
    return seen


def test_kill_while_input_required(host: HostProcess, key: str) -> None:
    http = host.http(key)
    task = send(http, message("draft", skill="approval-gated"))
    assert task["status"]["state"] == "input-required"
    host.kill()
    host.start()
    http = host.http(key)
    after = get_task(http, task["id"])
    assert after["status"]["state"] == "input-required"
    assert after["metadata"]["openwop"]["interrupt"]["kind"] == "approval"
    assert after["contextId"] == task["contextId"] and after["history"] == task["history"]
    record = task_record(http, task["id"])
    assert record["state"] == "input-required" and record["interruptKind"] == "approval"
    assert task_record(http, task["id"], path="/v1/host/sample/a2a/tasks") == record
    seen = _approve_while_watching(host, key, task["id"])
    assert [(f.kind, f.state) for f in transitions(seen)] == [
        ("task", "input-required"),
        ("status-update", "working"),
        ("status-update", "completed"),
    ]
    assert seen[-1].result["final"] is True
    assert task_record(http, task["id"])["state"] == "completed"
    _one_run_started(http, task["id"])


def test_kill_while_working(host: HostProcess, key: str) -> None:
    http = host.http(key)
    task = send(http, message(skill="slow-gate"), blocking=False)
    wait_until(
        lambda: any(e["type"] == "node.started" and e.get("nodeId") == "work" for e in run_events(http, task["id"])),
        what="the work to start",
    )
    host.kill()
    host.start()
    http = host.http(key)
    now = get_task(http, task["id"])
    assert now["status"]["state"] in ("working", "input-required")
    seen = _approve_while_watching(host, key, task["id"])
    assert [f.state for f in seen if f.kind == "status-update"][-1] == "completed"
    wait_state(http, task["id"], "completed")
    assert task_record(http, task["id"])["state"] == "completed"
    work_started = [
        e for e in run_events(http, task["id"]) if e["type"] == "node.started" and e.get("nodeId") == "work"
    ]
    assert len(work_started) == 1, "a started delay resumes, it does not start again"
    _one_run_started(http, task["id"])


def test_a_dropped_stream_resumes_after_a_restart(host: HostProcess, key: str) -> None:
    http = host.http(key)
    task = send(http, message("draft", skill="approval-gated"))
    seen: list[Frame] = []
    attached = threading.Event()

    def watch() -> None:
        try:
            with host.client(key) as watcher, open_stream(watcher, "tasks/resubscribe", {"id": task["id"]}) as frames:
                for frame in frames:
                    seen.append(frame)
                    attached.set()
        except httpx.HTTPError:
            pass  # the host died under the stream

    thread = threading.Thread(target=watch)
    thread.start()
    assert attached.wait(15)
    host.kill()
    thread.join(15)
    last_id = seen[-1].id
    assert last_id is not None
    host.start()
    http = host.http(key)
    send(http, message(data={"action": "accept"}, task_id=task["id"]))
    rest = stream(http, "tasks/resubscribe", {"id": task["id"]}, headers={"Last-Event-ID": str(last_id)})
    assert [(f.kind, f.state) for f in transitions(rest)] == [
        ("status-update", "working"),
        ("status-update", "completed"),
    ]
    _one_run_started(http, task["id"])


def test_seam_task_survives_a_restart(host: HostProcess, key: str) -> None:
    http = host.http(key)
    started = http.post("/v1/host/sample/a2a/tasks/start", json={"scenario": "paused-at-approval"})
    assert started.status_code == 201
    task_id = started.json()["taskId"]
    host.kill()
    host.start()
    http = host.http(key)
    record = task_record(http, task_id, path="/v1/host/sample/a2a/tasks")
    assert record["state"] == "input-required" and record["interruptKind"] == "approval"
    done = send(http, message(data={"action": "accept"}, task_id=task_id))
    assert done["status"]["state"] == "completed"
