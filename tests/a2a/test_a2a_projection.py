"""The run → A2A projection, in-process: the FINAL table, Tasks, stream events and records."""

from __future__ import annotations

import base64
import copy
from dataclasses import replace
from typing import Any

import orjson
import pytest
from schemas import a2a_validator, openwop_validator

import tether.a2a
from tether.a2a.files import FileBytes
from tether.a2a.projection import RUN_TO_TASK_STATE, status_view, task, task_record, task_state, updates
from tether.a2a.tasks import EncodedTasks, LiveTask, project_task_record
from tether.engine.state import apply, initial_snapshot
from tether.files import Blob
from tether.store.base import RunRow, TaskRecord
from tether.types import ACTIVE, TERMINAL

FINAL_TABLE = {
    "pending": "submitted",
    "running": "working",
    "paused": "working",
    "cancelling": "working",
    "waiting-approval": "input-required",
    "waiting-input": "input-required",
    "waiting-external": "input-required",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "canceled",
}
APPROVAL = {
    "kind": "approval",
    "nodeId": "gate",
    "interruptId": "int_1",
    "key": "run_1:gate:0",
    "requestedAt": "2026-01-01T00:00:00.000Z",
    "data": {
        "title": "Approve",
        "description": "Look first",
        "actions": ["accept", "reject"],
        "artifactData": {"secret": "x"},
    },
}
CLARIFICATION = {
    "kind": "clarification",
    "nodeId": "ask",
    "interruptId": "int_2",
    "key": "run_1:ask:0",
    "requestedAt": "2026-01-01T00:00:00.000Z",
    "data": {"questions": [{"id": "q1", "question": "Color?"}]},
}
EXTERNAL = {**APPROVAL, "kind": "external-event", "data": {"eventType": "paid"}}


def _state(status: str, **extra: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "runId": "run_1",
        "workflowId": "w",
        "status": status,
        "nodeStates": {},
        "transport": "a2a",
    }
    state["metadata"] = {"a2a": {"contextId": "ctx_1", "messageId": "m1", "skillId": "w"}}
    state["owner"] = {"tenant": "default", "principal": "key:dev"}
    interrupt = {"waiting-approval": APPROVAL, "waiting-input": CLARIFICATION, "waiting-external": EXTERNAL}.get(status)
    if interrupt is not None:
        state["interrupt"] = interrupt
    if status == "failed":
        state["error"] = {"code": "boom", "message": "it broke"}
    if status == "completed":
        state["outputs"] = {"payload": "hello"}
    state.update(extra)
    return state


def _row(status: str, **extra: Any) -> RunRow:
    return RunRow(
        "run_1",
        "default",
        "w",
        status,
        3,
        _state(status, **extra),
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:00:01.000Z",
    )


def test_the_table_is_the_final_projection_over_every_run_status() -> None:
    assert set(ACTIVE | TERMINAL) == set(FINAL_TABLE), "the engine's statuses changed: update the projection"
    assert dict(RUN_TO_TASK_STATE) == FINAL_TABLE
    with pytest.raises(ValueError, match="unknown run status"):
        task_state("sleeping")


@pytest.mark.parametrize("status", sorted(FINAL_TABLE))
def test_every_status_projects_to_a_valid_task_and_record(status: str) -> None:
    row = _row(status)
    doc = task(row, "ctx_1", [])
    a2a_validator("Task").validate(doc)
    assert doc["status"]["state"] == FINAL_TABLE[status]
    openwop = doc["metadata"]["openwop"]
    assert openwop["runStatus"] == status
    assert ("interrupt" in openwop) == (FINAL_TABLE[status] == "input-required")
    record = task_record("run_1", "ctx_1", row.state, row.updated_at)
    openwop_validator("a2a-task-state").validate(record)
    expected_kind = {"waiting-approval": "approval", "waiting-input": "clarification"}.get(status)
    assert record.get("interruptKind") == expected_kind
    assert set(record) <= {"taskId", "runId", "contextId", "state", "interruptKind", "updatedAt"}, (
        "the record is content-free"
    )


def test_interrupt_carrier_says_what_a_human_needs_and_no_more() -> None:
    approval = task(_row("waiting-approval"), "ctx_1", [])
    carrier = approval["metadata"]["openwop"]["interrupt"]
    assert carrier == {
        "kind": "approval",
        "nodeId": "gate",
        "title": "Approve",
        "description": "Look first",
        "actions": ["accept", "reject"],
    }
    message = approval["status"]["message"]
    assert message["role"] == "agent" and message["taskId"] == "run_1"
    assert "secret" not in str(approval), "the artifact under review is not projected"
    clarification = task(_row("waiting-input"), "ctx_1", [])["metadata"]["openwop"]["interrupt"]
    assert clarification["kind"] == "clarification" and clarification["questions"] == [
        {"id": "q1", "question": "Color?"}
    ]
    external = task(_row("waiting-external"), "ctx_1", [])["metadata"]["openwop"]["interrupt"]
    assert external["kind"] == "external-event" and "paid" in external["title"]


def test_failed_task_carries_the_error_and_completed_the_artifact() -> None:
    failed = task(_row("failed"), "ctx_1", [])
    assert failed["status"]["message"]["parts"][0] == {"kind": "text", "text": "it broke"}
    assert failed["metadata"]["openwop"]["error"] == {"code": "boom", "message": "it broke"}
    done = task(_row("completed"), "ctx_1", [])
    (artifact,) = done["artifacts"]
    assert artifact["artifactId"] == "run_1-outputs"
    assert artifact["parts"] == [{"kind": "text", "text": "hello"}, {"kind": "data", "data": {"payload": "hello"}}]
    two = task(_row("completed", outputs={"a": 1, "b": "x"}), "ctx_1", [])
    assert [p["kind"] for p in two["artifacts"][0]["parts"]] == ["data"]
    assert "artifacts" not in task(_row("completed", outputs={}), "ctx_1", [])


def test_history_length_keeps_the_newest_messages() -> None:
    history = [
        {"kind": "message", "role": "user", "messageId": f"m{i}", "parts": [{"kind": "text", "text": "x"}]}
        for i in range(3)
    ]
    assert [m["messageId"] for m in task(_row("running"), "c", history)["history"]] == ["m0", "m1", "m2"]
    assert [m["messageId"] for m in task(_row("running"), "c", history, 2)["history"]] == ["m1", "m2"]
    assert task(_row("running"), "c", history, 0)["history"] == []


def _event(seq: int, type_: str, payload: dict[str, Any], node_id: str | None = None) -> dict[str, Any]:
    doc = {
        "eventId": f"e{seq}",
        "runId": "run_1",
        "type": type_,
        "payload": payload,
        "timestamp": f"2026-01-01T00:00:0{seq}.000Z",
        "sequence": seq,
    }
    if node_id:
        doc["nodeId"] = node_id
    return doc


def _replay(events: list[dict[str, Any]], *, final_on_input_required: bool) -> list[dict[str, Any]]:
    state = initial_snapshot("run_1", "w", "2026-01-01T00:00:00.000Z")
    out: list[dict[str, Any]] = []
    for event in events:
        before = status_view(state)
        apply(state, event)
        out.extend(updates("run_1", "ctx_1", event, before, state, final_on_input_required=final_on_input_required))
    return out


LIFE = [
    _event(0, "run.started", {"inputs": {}, "transport": "a2a"}),
    _event(1, "node.started", {"nodeId": "gate"}, "gate"),
    _event(2, "node.suspended", {"nodeId": "gate", "interruptId": "int_1", "kind": "approval", "key": "k"}, "gate"),
    _event(3, "interrupt.requested", {"kind": "approval", "key": "k", "data": APPROVAL["data"]}, "gate"),
    _event(4, "approval.requested", {"nodeId": "gate"}, "gate"),
    _event(5, "interrupt.resolved", {"nodeId": "gate", "interruptId": "int_1", "kind": "approval"}, "gate"),
    _event(6, "node.completed", {"nodeId": "gate", "outputs": {}}, "gate"),
    _event(7, "run.completed", {"outputs": {"payload": "hi"}}),
]


def test_run_events_become_status_and_artifact_updates_in_order() -> None:
    out = _replay(LIFE, final_on_input_required=False)
    for item in out:
        a2a_validator(
            "TaskStatusUpdateEvent" if item["kind"] == "status-update" else "TaskArtifactUpdateEvent"
        ).validate(item)
    summary = [(o["kind"], o.get("status", {}).get("state"), o.get("final")) for o in out]
    assert summary == [
        ("status-update", "working", False),
        ("status-update", "input-required", False),
        ("status-update", "working", False),
        ("artifact-update", None, None),
        ("status-update", "completed", True),
    ]
    assert out[1]["metadata"]["openwop"]["interrupt"]["kind"] == "approval"
    assert "interrupt" not in out[2]["metadata"]["openwop"]
    ended_at_question = _replay(LIFE, final_on_input_required=True)
    assert ended_at_question[1]["final"] is True


def test_cancelling_stays_working_and_cancelled_is_canceled() -> None:
    events = [
        _event(0, "run.started", {"inputs": {}}),
        _event(1, "node.started", {"nodeId": "a"}, "a"),
        _event(2, "node.cancelled", {"nodeId": "a", "reason": "cancel-requested"}, "a"),
        _event(3, "run.cancelled", {"reason": "x"}),
    ]
    out = _replay(events, final_on_input_required=False)
    assert [(o["status"]["state"], o["final"]) for o in out] == [("working", False), ("canceled", True)]


def test_projector_writes_the_record_only_for_a2a_runs_and_only_on_change() -> None:
    created = _row("running")
    (record,) = project_task_record(None, created, [])
    assert isinstance(record, TaskRecord)
    assert (record.task_id, record.tenant, record.principal, record.context_id) == (
        "run_1",
        "default",
        "key:dev",
        "ctx_1",
    )
    openwop_validator("a2a-task-state").validate(record.record)
    still_working = copy.deepcopy(created)
    still_working.updated_at = "2026-01-01T00:00:02.000Z"
    assert project_task_record(created, still_working, []) == []
    paused = _row("waiting-approval")
    (changed,) = project_task_record(created, paused, [])
    assert isinstance(changed, TaskRecord)
    assert changed.record["state"] == "input-required" and changed.record["interruptKind"] == "approval"
    rest = _row("running")
    rest.state["transport"] = "rest"
    assert project_task_record(None, rest, []) == []


def test_public_surface_is_pinned() -> None:
    assert sorted(tether.a2a.__all__) == ["A2ACapabilities", "a2a_capabilities", "project_task_record"]


class _Blobs:
    """Just enough of a store for FileBytes: the blobs each run is linked to, and how often they are read."""

    def __init__(self, linked: dict[str, dict[str, bytes]]) -> None:
        self.linked = linked
        self.reads = 0

    async def read_blobs(self, run_id: str, digests: Any) -> dict[str, bytes]:
        self.reads += 1
        return {d: data for d, data in self.linked.get(run_id, {}).items() if d in digests}


async def test_an_encoded_task_is_kept_only_while_its_run_stays_at_one_sequence() -> None:
    encoded = EncodedTasks(FileBytes(_Blobs({})))  # type: ignore[arg-type]
    record = TaskRecord("run_1", "default", "key:a", "ctx_1", {}, "2026-01-01T00:00:00.000Z")
    history = [{"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}]
    working = LiveTask(record, _row("running"), history)
    first = await encoded.encode(working, None)
    assert orjson.loads(orjson.dumps(first)) == task(working.run, "ctx_1", history, None)
    assert await encoded.encode(working, None) is first, "a repeated read encodes nothing"
    assert orjson.loads(orjson.dumps(await encoded.encode(working, 0)))["history"] == [], (
        "another historyLength is another encoding"
    )
    moved = replace(
        working.run, status="completed", last_sequence=working.run.last_sequence + 1, state=_state("completed")
    )
    done = orjson.loads(orjson.dumps(await encoded.encode(LiveTask(record, moved, history), None)))
    assert done["status"]["state"] == "completed", "a commit's new sequence is encoded afresh"


async def test_a_task_with_files_is_rendered_with_their_bytes_and_never_kept_encoded() -> None:
    report, forged = Blob.of(b"%PDF-1.7 the report"), Blob.of(b"another run's file")
    blobs = _Blobs({"run_1": {report.digest: report.data}, "run_2": {forged.digest: forged.data}})
    files = FileBytes(blobs)  # type: ignore[arg-type]
    encoded = EncodedTasks(files)
    sent = {"kind": "file", "file": {"blob": report.digest, "size": report.size, "name": "q3.pdf", "mimeType": "x/y"}}
    stolen = {"kind": "file", "file": {"blob": forged.digest, "size": forged.size}}
    link = {"kind": "file", "file": {"uri": "https://example.com/a.pdf"}}
    history = [{"kind": "message", "messageId": "m1", "role": "user", "parts": [sent, stolen, link]}]
    record = TaskRecord("run_1", "default", "key:a", "ctx_1", {}, "2026-01-01T00:00:00.000Z")
    live = LiveTask(record, _row("running"), history)
    kept = copy.deepcopy(history)
    first = orjson.loads(orjson.dumps(await encoded.encode(live, None)))
    assert first["history"][0]["parts"] == [
        {
            "kind": "file",
            "file": {"bytes": base64.b64encode(report.data).decode(), "name": "q3.pdf", "mimeType": "x/y"},
        },
        link,
    ], "the bytes back in the 0.3 wire shape; a blob the run is not linked to is left out"
    assert history == kept, "the history read (maybe cached by the store) is never changed"
    again = orjson.loads(orjson.dumps(await encoded.encode(live, None)))
    assert again == first and blobs.reads == 2, "encoded again (not kept), the report's bytes from the cache"
    assert await files.inline("run_1", {"kind": "task", "history": []}) == {"kind": "task", "history": []}
