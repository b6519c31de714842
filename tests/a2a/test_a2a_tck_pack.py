"""The TCK pack (``examples/a2a-tck``): a workflow that does what the a2a-tck's scenarios ask, by messageId prefix.

The official a2a-tck picks what the agent under test should do with a message by the
prefix of its ``messageId`` (``tck-complete-task-…``, ``tck-artifact-file-…``; its
``scenarios/*.feature``). The pack routes on ``inputs.message.messageId``, the message that
started the run. These tests start a host as docs/a2a.md says to for a TCK run (the pack,
its default skill, a public agent) and drive scenarios as the TCK does: httpx on the card's
urls (JSON-RPC posted to ``<url>/``), no key, every answer checked by the 1.0 oracle.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_wire10 import user10
from backends import suite_host
from harness import Host
from proto_oracle import validate_v10

PACK = Path(__file__).resolve().parents[2] / "examples" / "a2a-tck"
V10 = {"A2A-Version": "1.0"}


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    return suite_host(request, "--workflows", str(PACK), "--default-skill", "tck", "--a2a-anonymous-tenant", "tck")


def _interface(host: Host, binding: str) -> str:
    with host.client() as client:
        card = client.get("/.well-known/agent-card.json").json()
    return next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == binding)


@pytest.fixture
def rpc(host: Host) -> Iterator[httpx.Client]:
    """A keyless JSON-RPC client on the card's url, as the a2a-tck makes it."""
    with httpx.Client(base_url=_interface(host, "JSONRPC"), headers=V10, timeout=30) as client:
        yield client


def _tck_message(scenario: str, text: str = "TCK scenario") -> dict[str, Any]:
    message = user10(text)
    message["messageId"] = f"{scenario}-{uuid.uuid4().hex[:8]}-jsonrpc"
    return message


def _call(client: httpx.Client, method: str, params: dict[str, Any]) -> Any:
    response = client.post("/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200, response.text
    body = response.json()
    validate_v10(f"JsonRpc:{method}", body)
    assert "error" not in body, body
    return body["result"]


def _send(client: httpx.Client, scenario: str, **config: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": _tck_message(scenario)}
    if config:
        params["configuration"] = config
    task: dict[str, Any] = _call(client, "SendMessage", params)["task"]
    return task


def _first_part(task: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = task["artifacts"][0]["parts"][0]
    return part


def test_each_artifact_kind_by_its_prefix(rpc: httpx.Client) -> None:
    text = _send(rpc, "tck-artifact-text")
    assert text["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _first_part(text) == {"text": "Generated text content"}
    assert _first_part(_send(rpc, "tck-artifact-data")) == {"data": {"key": "value", "count": 42}}
    raw = _first_part(_send(rpc, "tck-artifact-file"))
    assert base64.b64decode(raw["raw"]) == b"tck"
    assert (raw["filename"], raw["mediaType"]) == ("output.txt", "text/plain")
    url = _first_part(_send(rpc, "tck-artifact-file-url"))
    assert url == {"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}


def test_complete_reject_and_any_other_prefix(rpc: httpx.Client) -> None:
    done = _send(rpc, "tck-complete-task")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _first_part(done) == {"text": "Hello from TCK"}
    # every run is a task: the scenario that wants a bare Message gets a completed task with that text
    assert _first_part(_send(rpc, "tck-message-response")) == {"text": "Direct message response"}
    rejected = _send(rpc, "tck-reject-task")
    assert rejected["status"]["state"] == "TASK_STATE_FAILED" and "artifacts" not in rejected
    other = _send(rpc, "tck-send-001")
    assert other["status"]["state"] == "TASK_STATE_COMPLETED"
    (part,) = [p for p in other["artifacts"][0]["parts"] if "text" in p]
    assert part["text"].startswith("Unhandled messageId prefix: tck-send-001-")


def test_input_required_then_a_reply_completes(rpc: httpx.Client) -> None:
    asked = _send(rpc, "tck-input-required")
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    reply = {**_tck_message("tck-complete-task", "TCK follow-up"), "taskId": asked["id"]}
    done = _call(rpc, "SendMessage", {"message": reply})["task"]
    assert done["id"] == asked["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _first_part(done) == {"text": "Received: TCK follow-up"}


def _stream(client: httpx.Client, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    events: list[dict[str, Any]] = []
    with client.stream("POST", "/", json=body) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                validate_v10(f"JsonRpcStream:{method}", event)
                events.append(event["result"])
    return events


def test_a_streamed_scenario_and_the_long_running_one(host: Host, rpc: httpx.Client) -> None:
    events = _stream(rpc, "SendStreamingMessage", {"message": _tck_message("tck-stream-001")})
    assert "task" in events[0]
    (artifact,) = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert artifact["parts"][0] == {"text": "Stream hello from TCK"}
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    # the resubscription scenario works for twice the TCK's 2 s streaming timeout, then completes
    began = time.monotonic()
    started = _send(rpc, "test-resubscribe-message-id", returnImmediately=True)
    assert started["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    attached = _stream(rpc, "SubscribeToTask", {"id": started["id"]})
    assert attached[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert attached[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert time.monotonic() - began >= 4.0

    # the HTTP+JSON binding routes the same way
    with httpx.Client(base_url=_interface(host, "HTTP+JSON"), headers=V10, timeout=30) as rest:
        answered = rest.post("/message:send", json={"message": _tck_message("tck-artifact-data")})
    assert answered.status_code == 200, answered.text
    assert _first_part(answered.json()["task"]) == {"data": {"key": "value", "count": 42}}
