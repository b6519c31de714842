"""Every integer the API takes is bounded to what the stores hold, and refused past it, never a 500.

A sequence past a signed 64-bit integer once reached SQLite (``OverflowError``: HTTP 500,
and the keep-alive connection closed under the client's next request). Each bound is
tried just inside (answered) and just outside (refused with the surface's own error:
``400`` and the error envelope on REST, ``-32602`` on A2A), on both stores, and the
connection that carried a refusal carries the next request.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from harness import Host
from schemas import openwop_validator

from tether.types import INT32_MAX, INT64_MAX

V10 = {"A2A-Version": "1.0"}


@pytest.fixture
def http(host: Host, key: str) -> httpx.Client:
    return host.http(key)


def _task(http: httpx.Client) -> str:
    message = {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    message["metadata"] = {"skillId": "echo"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    task: dict[str, Any] = http.post("/v1/a2a", json=body, headers=V10).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return str(task["id"])


def _rpc(http: httpx.Client, method: str, params: dict[str, Any], version: str | None) -> dict[str, Any]:
    headers = {"A2A-Version": version} if version else {}
    response = http.post(
        "/v1/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=headers
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _invalid_params(answer: dict[str, Any], field: str) -> None:
    assert answer.get("error", {}).get("code") == -32602, answer
    assert field in answer["error"]["message"], answer


def test_a_poll_past_the_largest_sequence_is_400_and_the_connection_lives_on(http: httpx.Client) -> None:
    run_id = _task(http)
    poll = f"/v1/runs/{run_id}/events/poll"
    at_max = http.get(poll, params={"lastSequence": INT64_MAX, "timeout": 0})
    assert at_max.status_code == 200 and at_max.json()["events"] == [], at_max.text
    for past in (INT64_MAX + 1, 2**64, 10**30):
        refused = http.get(poll, params={"lastSequence": past, "timeout": 0})
        assert refused.status_code == 400, refused.text
        body = refused.json()
        openwop_validator("error-envelope").validate(body)
        assert body["error"] == "validation_error" and "lastSequence" in body["message"]
        assert refused.headers.get("connection", "").lower() != "close"
        # the same client's next request, on the connection that carried the refusal, is answered
        assert http.get(poll, params={"lastSequence": -1, "timeout": 0}).json()["events"], "the run has events"


def test_the_openapi_document_declares_the_sequence_bound(http: httpx.Client) -> None:
    document = http.get("/v1/openapi.json").json()
    (param,) = (
        p
        for p in document["paths"]["/v1/runs/{run_id}/events/poll"]["get"]["parameters"]
        if p["name"] == "lastSequence"
    )
    schema = param["schema"].get("anyOf", [param["schema"]])[0]
    assert schema["maximum"] == INT64_MAX and schema["minimum"] == -1


@pytest.mark.parametrize(("version", "method"), [(None, "tasks/get"), ("1.0", "GetTask")])
def test_history_length_is_an_int32(http: httpx.Client, version: str | None, method: str) -> None:
    task = _task(http)
    inside = _rpc(http, method, {"id": task, "historyLength": INT32_MAX}, version)
    assert inside["result"]["id"] == task
    for past in (INT32_MAX + 1, INT64_MAX + 1):
        _invalid_params(_rpc(http, method, {"id": task, "historyLength": past}, version), "historyLength")


def test_generations_are_int64_written_in_ascii_digits(http: httpx.Client) -> None:
    task = _task(http)
    assert _rpc(http, "GetTask", {"id": task, "currentGeneration": str(INT64_MAX)}, "1.1")["result"]["id"] == task
    message = {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "draft"}]}
    message["metadata"] = {"skillId": "approval-gated"}
    gated = _rpc(http, "SendMessage", {"message": message}, "1.1")["result"]["task"]
    assert gated["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    for bad in (str(INT64_MAX + 1), INT64_MAX + 1, "²", "٣", "1_0", "+1", " 1"):
        _invalid_params(_rpc(http, "GetTask", {"id": task, "currentGeneration": bad}, "1.1"), "currentGeneration")
        reply = {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "taskId": gated["id"]}
        reply["parts"] = [{"data": {"action": "accept"}}]
        answer = _rpc(http, "SendMessage", {"message": reply, "configuration": {"ifGenerationMatch": bad}}, "1.1")
        _invalid_params(answer, "ifGenerationMatch")
    after = _rpc(http, "GetTask", {"id": gated["id"]}, "1.1")["result"]
    assert after["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and after["generation"] == gated["generation"]


@pytest.mark.parametrize("value", [str(INT32_MAX + 1), "-2147483649", "٣", "1_0", "99999999999999999999999"])
def test_http_json_int32_query_parameters(http: httpx.Client, value: str) -> None:
    task = _task(http)
    for path, name in ((f"/v1/a2a/rest/tasks/{task}", "historyLength"), ("/v1/a2a/rest/tasks", "pageSize")):
        refused = http.get(path, params={name: value}, headers=V10)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["details"][0]["reason"] == "INVALID_PARAMS" and name in error["message"]
    configs = http.get(f"/v1/a2a/rest/tasks/{task}/pushNotificationConfigs", params={"pageSize": value}, headers=V10)
    assert configs.status_code == 400, configs.text


def test_a_last_event_id_is_ascii_digits(http: httpx.Client) -> None:
    task = _task(http)
    for bad in ("1_0", "٣", "+1"):
        headers = {**V10, "Accept": "text/event-stream", "Last-Event-ID": bad.encode()}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task}}
        answer = http.post("/v1/a2a", json=body, headers=headers)
        assert answer.status_code == 200 and '"code":-32602' in answer.text.replace(" ", ""), answer.text
        assert "Last-Event-ID" in answer.text
