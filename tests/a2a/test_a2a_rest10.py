"""The A2A 1.0 HTTP+JSON binding under /v1/a2a/rest: the same methods as JSON-RPC 1.0, bare answers, Status errors.

Every success body is checked by the outside oracle (a2a-sdk 1.3.0's strict protobuf
models), every error against the binding's ``google.rpc.Status`` shape with an ErrorInfo.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from a2a_wire10 import result10, user10
from harness import Host
from proto_oracle import validate_v10

REST = "/v1/a2a/rest"
V10 = {"A2A-Version": "1.0"}
MEDIA = "application/a2a+json"


def _ok(response: httpx.Response, type_name: str) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == MEDIA and response.headers["a2a-version"] == "1.0"
    body = response.json()
    validate_v10(type_name, body)
    return body


def _refused(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"  # a google.rpc.Status, not an A2A object
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == status and error["message"]
    info = error["details"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" and info["domain"] == "a2a-protocol.org"
    assert info["reason"] == reason, error
    return error


def _send(http: httpx.Client, text: str, skill: str, **config: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"message": user10(text, skill=skill)}
    if config:
        body["configuration"] = config
    response = http.post(f"{REST}/message:send", headers={**V10, "content-type": MEDIA}, content=json.dumps(body))
    task: dict[str, Any] = _ok(response, "SendMessageResponse")["task"]
    return task


def test_send_get_list_cancel_and_reply_over_rest(http: httpx.Client) -> None:
    done = _send(http, "hello", "echo")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0] == {"text": "hello"}
    got = _ok(http.get(f"{REST}/tasks/{done['id']}", headers=V10, params={"historyLength": 0}), "Task")
    assert got["id"] == done["id"] and "history" not in got
    # the same task read over JSON-RPC 1.0 is the same document
    assert result10(http, "GetTask", {"id": done["id"], "historyLength": 0}) == got

    gated = _send(http, "draft", "approval-gated")
    assert gated["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    context = gated["contextId"]
    listed = _ok(
        http.get(f"{REST}/tasks", headers=V10, params={"contextId": context, "status": "TASK_STATE_INPUT_REQUIRED"}),
        "ListTasksResponse",
    )
    assert [t["id"] for t in listed["tasks"]] == [gated["id"]]
    assert listed["nextPageToken"] == "" and listed["totalSize"] == 1

    reply = {"message": {**user10("ok"), "taskId": gated["id"], "parts": [{"data": {"action": "accept"}}]}}
    answered = _ok(http.post(f"{REST}/message:send", headers=V10, json=reply), "SendMessageResponse")
    assert answered["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    waiting = _send(http, "draft", "approval-gated")
    canceled = _ok(http.post(f"{REST}/tasks/{waiting['id']}:cancel", headers=V10, json={}), "Task")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    error = _refused(http.post(f"{REST}/tasks/{waiting['id']}:cancel", headers=V10), 400, "TASK_NOT_CANCELABLE")
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["details"][0]["metadata"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.parametrize("verb", ["POST", "GET"])
def test_subscribe_streams_bare_stream_responses_until_the_task_ends(http: httpx.Client, verb: str) -> None:
    gated = _send(http, "draft", "approval-gated")
    seen: list[dict[str, Any]] = []
    with http.stream(verb, f"{REST}/tasks/{gated['id']}:subscribe", headers=V10) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            frame = json.loads(line[5:])
            validate_v10("StreamResponse", frame)
            seen.append(frame)
            if len(seen) == 1:
                assert frame["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                reply = {"message": {**user10("ok"), "taskId": gated["id"], "parts": [{"data": {"action": "accept"}}]}}
                assert http.post(f"{REST}/message:send", headers=V10, json=reply).status_code == 200
    assert "jsonrpc" not in seen[0], "HTTP+JSON streams carry bare StreamResponses"
    last = seen[-1]["statusUpdate"]["status"]["state"]
    assert last == "TASK_STATE_COMPLETED"
    _refused(http.post(f"{REST}/tasks/{gated['id']}:subscribe", headers=V10), 400, "UNSUPPORTED_OPERATION")


def test_push_config_routes(http: httpx.Client) -> None:
    gated = _send(http, "draft", "approval-gated")
    base = f"{REST}/tasks/{gated['id']}/pushNotificationConfigs"
    # a URL the egress guard refuses is refused before anything is stored
    refused = _refused(http.post(base, headers=V10, json={"url": "https://10.0.0.5/push"}), 400, "INVALID_PARAMS")
    assert "refused" in refused["message"]
    assert _ok(http.get(base, headers=V10), "ListTaskPushNotificationConfigsResponse")["configs"] == []
    _refused(http.get(f"{base}/nope", headers=V10), 404, "TASK_NOT_FOUND")
    assert _ok(http.delete(f"{base}/nope", headers=V10), "Empty") == {}


def test_refusals_use_the_binding_status_table(host: Host, http: httpx.Client, other_tenant_key: str) -> None:
    unknown = f"run_{uuid.uuid4().hex}"
    _refused(http.get(f"{REST}/tasks/{unknown}", headers=V10), 404, "TASK_NOT_FOUND")
    version = _refused(
        http.get(f"{REST}/tasks/{unknown}", headers={"A2A-Version": "99.0"}), 400, "VERSION_NOT_SUPPORTED"
    )
    assert version["details"][0]["metadata"]["requestedVersion"] == "99.0"
    _refused(http.get(f"{REST}/tasks/{unknown}"), 400, "VERSION_NOT_SUPPORTED")  # no header is 0.3: not served here
    typed = http.post(f"{REST}/message:send", headers={**V10, "content-type": "text/plain"}, content=b'{"message": {}}')
    _refused(typed, 415, "CONTENT_TYPE_NOT_SUPPORTED")
    _refused(http.post(f"{REST}/message:send", headers=V10, json={"message": {"parts": []}}), 400, "INVALID_PARAMS")
    _refused(http.get(f"{REST}/tasks", headers=V10, params={"pageSize": "many"}), 400, "INVALID_PARAMS")
    _refused(http.get(f"{REST}/nowhere", headers=V10), 404, "METHOD_NOT_FOUND")
    not_allowed = http.delete(f"{REST}/tasks", headers=V10)
    _refused(not_allowed, 405, "METHOD_NOT_ALLOWED")
    assert not_allowed.headers["allow"] == "GET"

    # another tenant's task reads exactly like an unknown one, under a tenant prefix too
    mine = _send(http, "hi", "echo")
    with host.client() as client:
        other = {**V10, "Authorization": f"Bearer {other_tenant_key}"}
        foreign = client.get(f"{REST}/tasks/{mine['id']}", headers=other)
        missing = client.get(f"{REST}/tasks/{unknown}", headers=other)
        prefixed = client.get(f"{REST}/acme/tasks/{mine['id']}", headers=other)
        anonymous = client.get(f"{REST}/tasks/{mine['id']}", headers=V10)
    assert foreign.status_code == missing.status_code == prefixed.status_code == 404
    assert foreign.text.replace(mine["id"], unknown) == missing.text
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].lower().startswith("bearer")
    assert anonymous.json()["error"]["status"] == "UNAUTHENTICATED"


def test_the_tenant_prefix_names_the_callers_own_tenant(http: httpx.Client) -> None:
    task = _send(http, "hi", "echo")
    assert _ok(http.get(f"{REST}/default/tasks/{task['id']}", headers=V10), "Task")["id"] == task["id"]
    _refused(http.get(f"{REST}/acme/tasks/{task['id']}", headers=V10), 404, "TASK_NOT_FOUND")
    _refused(http.get(f"{REST}/acme/tasks", headers=V10), 400, "INVALID_PARAMS")
