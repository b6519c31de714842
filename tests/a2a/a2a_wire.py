"""Raw A2A v0.3 JSON-RPC and SSE against a real host, every answer checked by the official schemas.

Tests speak the wire with httpx (the a2a-sdk interop tests use the SDK instead). Every
response and stream event that passes through here is validated against the A2A v0.3
JSON Schema, and every A2ATaskState against the OpenWOP schema, so no test can forget.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from harness import wait_until
from schemas import a2a_validator, openwop_validator

RPC = "/v1/a2a"
#: test-only workflows, loaded with --workflows (so they are skills too)
WORKFLOWS = Path(__file__).resolve().parent / "workflows"
_SUCCESS = {
    "message/send": "SendMessageSuccessResponse",
    "tasks/get": "GetTaskSuccessResponse",
    "tasks/cancel": "CancelTaskSuccessResponse",
    "tasks/pushNotificationConfig/set": "SetTaskPushNotificationConfigSuccessResponse",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfigSuccessResponse",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigSuccessResponse",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfigSuccessResponse",
}
_RESULT = {
    "task": "Task",
    "message": "Message",
    "status-update": "TaskStatusUpdateEvent",
    "artifact-update": "TaskArtifactUpdateEvent",
}
_ids = itertools.count(1)


def message(
    text: str | None = None,
    *,
    data: dict[str, Any] | None = None,
    message_id: str | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
    skill: str | None = None,
) -> dict[str, Any]:
    """A user Message with a text and/or a data part (with neither, an empty data part).

    The host refuses ``parts: []``; an empty data part is the message that adds no inputs.
    """
    parts: list[dict[str, Any]] = []
    if text is not None:
        parts.append({"kind": "text", "text": text})
    if data is not None or text is None:
        parts.append({"kind": "data", "data": data or {}})
    doc: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": message_id or f"msg-{uuid.uuid4()}",
        "parts": parts,
    }
    if task_id is not None:
        doc["taskId"] = task_id
    if context_id is not None:
        doc["contextId"] = context_id
    if skill is not None:
        doc["metadata"] = {"skillId": skill}
    a2a_validator("Message").validate(doc)
    return doc


def check_response(method: str, body: dict[str, Any]) -> None:
    """Validate one JSON-RPC response (success or error) against the v0.3 schema."""
    if "error" in body:
        a2a_validator("JSONRPCErrorResponse").validate(body)
        assert "result" not in body
        return
    a2a_validator(_SUCCESS.get(method, "JSONRPCSuccessResponse")).validate(body)
    result = body["result"]
    if isinstance(result, dict) and "kind" in result:
        a2a_validator(_RESULT[result["kind"]]).validate(result)
        if result["kind"] == "task":
            check_task(result)


def check_task(task: dict[str, Any]) -> None:
    """Pin the OpenWOP carrier rule: metadata.openwop.interrupt iff input-required."""
    a2a_validator("Task").validate(task)
    openwop = task["metadata"]["openwop"]
    assert openwop["runId"] == task["id"]
    assert ("interrupt" in openwop) == (task["status"]["state"] == "input-required"), task


def post(
    http: httpx.Client, method: str, params: Any, *, request_id: Any = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids) if request_id is None else request_id,
        "method": method,
        "params": params,
    }
    return http.post(RPC, json=body, headers=headers)


def rpc(http: httpx.Client, method: str, params: Any, **kwargs: Any) -> dict[str, Any]:
    """The checked JSON-RPC response of one non-streaming call."""
    response = post(http, method, params, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    check_response(method, body)
    return body


def result(http: httpx.Client, method: str, params: Any, **kwargs: Any) -> Any:
    body = rpc(http, method, params, **kwargs)
    assert "result" in body, body
    return body["result"]


def error(http: httpx.Client, method: str, params: Any, **kwargs: Any) -> dict[str, Any]:
    body = rpc(http, method, params, **kwargs)
    assert "error" in body, body
    value: dict[str, Any] = body["error"]
    return value


def send(http: httpx.Client, msg: dict[str, Any], *, blocking: bool = True, **config: Any) -> dict[str, Any]:
    return result(http, "message/send", {"message": msg, "configuration": {"blocking": blocking, **config}})


def get_task(http: httpx.Client, task_id: str, **params: Any) -> dict[str, Any]:
    return result(http, "tasks/get", {"id": task_id, **params})


@dataclass(frozen=True)
class Frame:
    """One SSE event: its ``id:`` (None when absent) and its JSON-RPC response."""

    id: int | None
    body: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, self.body
        value: dict[str, Any] = self.body["result"]
        return value

    @property
    def kind(self) -> str:
        return str(self.result["kind"])

    @property
    def state(self) -> str | None:
        r = self.result
        return r["status"]["state"] if r["kind"] in ("task", "status-update") else None

    @property
    def progress(self) -> dict[str, Any] | None:
        """A multi-step task's progress report (a ``working`` update naming a step), else None."""
        if self.kind != "status-update":
            return None
        found: dict[str, Any] | None = self.result.get("metadata", {}).get("openwop", {}).get("progress")
        return found


def transitions(frames: list[Frame]) -> list[Frame]:
    """The frames that change what the task is (progress reports left out)."""
    return [f for f in frames if f.progress is None]


def _frames(response: httpx.Response) -> Iterator[Frame]:
    sse_id: int | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                body = json.loads("\n".join(data))
                if "error" in body:
                    a2a_validator("JSONRPCErrorResponse").validate(body)
                else:
                    a2a_validator("SendStreamingMessageSuccessResponse").validate(body)
                    a2a_validator(_RESULT[body["result"]["kind"]]).validate(body["result"])
                    if body["result"]["kind"] == "task":
                        check_task(body["result"])
                yield Frame(sse_id, body)
            sse_id, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("id:"):
            sse_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].strip())


@contextmanager
def open_stream(
    http: httpx.Client, method: str, params: Any, *, headers: dict[str, str] | None = None, request_id: Any = "s"
) -> Iterator[Iterator[Frame]]:
    """A live SSE stream; iterate it for checked frames, leave the block to drop it."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    with http.stream("POST", RPC, json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield _frames(response)


def stream(http: httpx.Client, method: str, params: Any, **kwargs: Any) -> list[Frame]:
    """Every frame of a stream, until the host closes it."""
    with open_stream(http, method, params, **kwargs) as frames:
        return list(frames)


def task_record(http: httpx.Client, task_id: str, *, path: str = "/v1/a2a/tasks") -> dict[str, Any]:
    """The durable A2ATaskState, validated against the OpenWOP schema."""
    response = http.get(f"{path}/{task_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    openwop_validator("a2a-task-state").validate(record)
    assert record["taskId"] == record["runId"] == task_id
    if "interruptKind" in record:
        assert record["state"] == "input-required", record
    return record


def run_events(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """The run's whole event log, through the OpenWOP REST long-poll."""
    response = http.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0})
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def wait_state(http: httpx.Client, task_id: str, *states: str, timeout: float = 15.0) -> dict[str, Any]:
    """The task once its state is one of ``states`` (polled with tasks/get)."""

    def probe() -> dict[str, Any] | None:
        task = get_task(http, task_id)
        return task if task["status"]["state"] in states else None

    found: dict[str, Any] = wait_until(
        probe, timeout=timeout, interval=0.05, what=f"task {task_id} to be {' or '.join(states)}"
    )
    return found
