"""A2A 1.0 pushes: a StreamResponse as application/a2a+json with the config's Authorization, beside 0.3 pushes.

A config remembers the version it was registered in, and its pushes take that version's
shape; both go through the one guarded egress path and durable outbox. The receiver is
a real HTTPS server on loopback with a test CA, reachable only through the operator
switches.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from a2a_wire import WORKFLOWS, result
from backends import Hosts
from harness import wait_until
from inproc import InProcessHost
from receiver import Receiver, egress_to

CREDENTIALS = "cred-v10-5e6f7a8b-raw"
TOKEN = "tok-v10-1a2b3c4d-raw"
V10 = {"A2A-Version": "1.0"}


def _host(start_host: Hosts[InProcessHost], receiver: Receiver) -> tuple[InProcessHost, httpx.Client]:
    host = start_host(
        "--workflows",
        str(WORKFLOWS),
        *egress_to(receiver),
        "--push-retry-schedule",
        "300ms,600ms,1s",
    )
    assert host.dev_key
    return host, host.http(host.dev_key)


def call(http: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 1.0 JSON-RPC call; its ``result`` (the test fails on an error)."""
    response = http.post("/v1/a2a", headers=V10, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert response.status_code == 200 and response.headers["a2a-version"] == "1.0", response.text
    body = response.json()
    assert "result" in body, body
    return body["result"]  # type: ignore[no-any-return]


def _message(
    text: str | None = None, *, data: Any = None, task_id: str | None = None, skill: str | None = None
) -> dict[str, Any]:
    parts = ([{"text": text}] if text is not None else []) + ([{"data": data}] if data is not None else [])
    doc: dict[str, Any] = {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": parts}
    if task_id:
        doc["taskId"] = task_id
    if skill:
        doc["metadata"] = {"skillId": skill}
    return doc


def _v10_config(receiver: Receiver, path: str = "/push") -> dict[str, Any]:
    return {
        "url": receiver.url(path),
        "token": TOKEN,
        "authentication": {"scheme": "Bearer", "credentials": CREDENTIALS},
    }


def test_a_config_registered_over_1_0_gets_stream_responses_and_a_0_3_one_keeps_its_shape(
    start_host: Hosts[InProcessHost], receiver: Receiver
) -> None:
    host, http = _host(start_host, receiver)
    sent = call(
        http,
        "SendMessage",
        {
            "message": _message("draft", skill="approval-gated"),
            "configuration": {"taskPushNotificationConfig": _v10_config(receiver, "/v10")},
        },
    )
    task_id = sent["task"]["id"]
    assert sent["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    legacy = {"url": receiver.url("/v03"), "authentication": {"schemes": ["Bearer"], "credentials": CREDENTIALS}}
    result(http, "tasks/pushNotificationConfig/set", {"taskId": task_id, "pushNotificationConfig": legacy})
    wait_until(lambda: receiver.bodies("/v10"), what="the 1.0 input-required push")

    first = next(r for r in receiver.requests if r.path == "/v10")
    assert first.headers["content-type"] == "application/a2a+json"
    assert first.headers["authorization"] == f"Bearer {CREDENTIALS}"
    assert first.headers["webhook-id"]
    pushed = json.loads(first.body)
    assert list(pushed) == ["statusUpdate"], "a StreamResponse holds exactly one member"
    update = pushed["statusUpdate"]
    assert update["taskId"] == task_id and update["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "kind" not in update and "final" not in update

    call(http, "SendMessage", {"message": _message(data={"action": "accept"}, task_id=task_id)})
    wait_until(lambda: len(receiver.bodies("/v10")) >= 2 and receiver.bodies("/v03"), what="the completed pushes")
    states = [json.loads(b)["statusUpdate"]["status"]["state"] for b in receiver.bodies("/v10")]
    assert states == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]
    legacy_push = next(r for r in receiver.requests if r.path == "/v03")
    assert legacy_push.headers["content-type"] == "application/json"
    legacy_body = json.loads(legacy_push.body)
    assert legacy_body["kind"] == "status-update" and legacy_body["status"]["state"] == "completed"
    assert legacy_body["final"] is True

    # reads never return the credentials or the token, in either version
    listed = call(http, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert listed["nextPageToken"] == ""
    assert {c["url"] for c in listed["configs"]} == {receiver.url("/v10"), receiver.url("/v03")}
    for config in listed["configs"]:
        assert config["taskId"] == task_id and config["authentication"] == {"scheme": "Bearer"}
        got = call(http, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": config["id"]})
        assert got == config
    host.stop()
    for secret in (CREDENTIALS, TOKEN):
        assert secret not in json.dumps(listed)
        assert secret.encode() not in host.stored_bytes()


def test_a_1_0_push_never_follows_a_redirect(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    _, http = _host(start_host, receiver)
    receiver.script = lambda r: (307, {"Location": receiver.url("/elsewhere")}) if r.path == "/push" else (204, {})
    call(
        http,
        "SendMessage",
        {
            "message": _message("x", skill="approval-gated"),
            "configuration": {"taskPushNotificationConfig": _v10_config(receiver)},
        },
    )
    dead = wait_until(
        lambda: http.get("/v1/deliveries", params={"status": "dead"}).json()["deliveries"],
        timeout=20,
        what="the dead letter",
    )
    assert "307" in dead[0]["lastError"]
    assert receiver.bodies("/elsewhere") == [], "a redirect is never followed"


def test_nothing_is_delivered_after_the_config_is_deleted(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    _, http = _host(start_host, receiver)
    task = call(http, "SendMessage", {"message": _message("x", skill="approval-gated")})["task"]
    created = call(http, "CreateTaskPushNotificationConfig", {"taskId": task["id"], **_v10_config(receiver)})
    assert created["taskId"] == task["id"] and created["id"] and "token" not in created
    assert call(http, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": created["id"]}) == {}
    assert call(http, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": created["id"]}) == {}, (
        "deleting again is not an error"
    )
    assert call(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})["configs"] == []
    done = call(http, "SendMessage", {"message": _message(data={"action": "accept"}, task_id=task["id"])})
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # deliveries are enqueued in the very commit that completes the task: none exist, none will
    assert http.get("/v1/deliveries").json()["deliveries"] == []
    assert receiver.requests == []
