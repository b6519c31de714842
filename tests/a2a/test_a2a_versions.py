"""Version negotiation on one URL, raw over httpx: ``A2A-Version`` picks 0.3 or 1.0, anything else is -32009.

Every 1.0 answer here also goes through the outside oracle (``proto_oracle``: a2a-sdk
1.3.0's protobuf models, strict), and every 0.3 answer through the v0.3 JSON Schema
(``a2a_wire``), so a version that answers in the other version's shapes fails.
"""

from __future__ import annotations

import json
import secrets
import uuid
from typing import Any

import httpx
import pytest
from a2a_wire import RPC, check_response, message, send
from a2a_wire10 import answer10, ids, post10, result10, user10
from proto_oracle import validate_v10


def version_refusal(response: httpx.Response, requested: str) -> None:
    body = response.json()
    validate_v10("JsonRpc:SendMessage", body)
    error = body["error"]
    assert error["code"] == -32009, body
    info = error["data"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["reason"] == "VERSION_NOT_SUPPORTED" and info["domain"] == "a2a-protocol.org"
    assert info["metadata"]["requestedVersion"] == requested
    assert set(info["metadata"]["supportedVersions"].split(",")) == {"1.0", "0.3", "1.1"}


def test_no_header_is_0_3(http: httpx.Client) -> None:
    response = http.post(
        RPC,
        json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message("old")}},
    )
    assert response.headers["A2A-Version"] == "0.3"
    body = response.json()
    check_response("message/send", body)
    assert body["result"]["kind"] == "task" and body["result"]["status"]["state"] == "completed"
    empty = http.post(
        RPC,
        json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": body["result"]["id"]}},
        headers={"A2A-Version": ""},
    )
    assert empty.headers["A2A-Version"] == "0.3" and empty.json()["result"]["status"]["state"] == "completed"


@pytest.mark.parametrize(
    ("header", "query"),
    [("1.0", None), ("1.0.3", None), (None, "1.0"), ("1.0", "garbage")],
    ids=["header", "header-with-patch", "query", "header-wins-over-query"],
)
def test_1_0_is_selected_by_header_or_query(http: httpx.Client, header: str | None, query: str | None) -> None:
    sent = result10(http, "SendMessage", {"message": user10("new")}, version=header, query=query)
    task = sent["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and "kind" not in task
    got = result10(http, "GetTask", {"id": task["id"]}, version=header, query=query)
    assert got["id"] == task["id"] and got["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("requested", ["2.0", "99.0", "garbage", "0.2"])
def test_unserved_versions_are_refused_with_error_info(http: httpx.Client, requested: str) -> None:
    request_id = next(ids)
    response = post10(http, "SendMessage", {"message": user10("x")}, version=requested, request_id=request_id)
    version_refusal(response, requested)
    assert response.json()["id"] == request_id
    slash = post10(http, "message/send", {"message": message("x")}, version=requested)
    version_refusal(slash, requested)
    by_query = post10(http, "GetTask", {"id": "run_x"}, version=None, query=requested)
    version_refusal(by_query, requested)


def test_each_version_refuses_the_other_versions_methods(http: httpx.Client) -> None:
    pascal = post10(http, "GetTask", {"id": "run_x"}, version=None)
    assert pascal.headers["A2A-Version"] == "0.3"
    assert pascal.json()["error"]["code"] == -32009, "a 1.0 method without the header: the caller forgot it"
    slash = post10(http, "tasks/get", {"id": "run_x"}, version="1.0")
    body = answer10(slash, "GetTask")
    assert body["error"]["code"] == -32601 and "GetTask" in body["error"]["message"], "names the 1.0 method"
    unknown = post10(http, "NoSuchMethod", {}, version="1.0")
    assert answer10(unknown, "NoSuchMethod")["error"]["code"] == -32601


def test_1_0_answers_pass_the_proto_oracle(http: httpx.Client) -> None:
    """The 1.0 results the SDK suite also reads, here raw: each one strictly a message of a2a.proto."""
    waiting = result10(http, "SendMessage", {"message": user10("draft", skill="approval-gated")})["task"]
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    validate_v10("SendMessageResponse", {"task": waiting})
    listed = result10(http, "ListTasks", {"contextId": waiting["contextId"], "pageSize": 5})
    validate_v10("ListTasksResponse", listed)
    assert [t["id"] for t in listed["tasks"]] == [waiting["id"]] and listed["nextPageToken"] == ""
    card = http.get("/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}).json()
    validate_v10("AgentCard+0.3", card)
    validate_v10("AgentCard", result10(http, "GetExtendedAgentCard", None))
    subscribe = {"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": waiting["id"]}}
    with http.stream("POST", RPC, json=subscribe, headers={"A2A-Version": "1.0"}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["A2A-Version"] == "1.0"
        first = next(line for line in response.iter_lines() if line.startswith("data:"))
    event = json.loads(first[5:])
    validate_v10("JsonRpcStream:SubscribeToTask", event)
    assert event["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", "the current Task first"
    approval = {"messageId": f"v10-{uuid.uuid4()}", "role": "ROLE_USER", "taskId": waiting["id"]}
    approval["parts"] = [{"data": {"action": "accept"}}]
    done = result10(http, "SendMessage", {"message": approval})
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def _same_length_unknown(task_id: str) -> str:
    """An id no task has, shaped like ``task_id`` (same prefix and length), so only the id differs."""
    prefix, _, rest = task_id.partition("_")
    return f"{prefix}_{secrets.token_hex(len(rest))[: len(rest)]}"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("GetTask", lambda t: {"id": t}),
        ("CancelTask", lambda t: {"id": t}),
        ("SubscribeToTask", lambda t: {"id": t}),
        ("ListTaskPushNotificationConfigs", lambda t: {"taskId": t}),
    ],
)
def test_a_foreign_task_is_answered_exactly_like_an_unknown_one(
    http: httpx.Client, host: Any, other_tenant_key: str, method: str, params: Any
) -> None:
    theirs = send(host.http(other_tenant_key), message("theirs", skill="approval-gated"))
    assert theirs["status"]["state"] == "input-required"
    unknown = _same_length_unknown(theirs["id"])
    answers = []
    for task_id in (theirs["id"], unknown):
        response = post10(http, method, params(task_id), request_id=41)
        answer10(response, method)
        assert response.json()["error"]["code"] == -32001
        answers.append((response.status_code, response.content.replace(task_id.encode(), b"<id>")))
    assert answers[0] == answers[1], "byte for byte, the id aside: nothing says the task exists elsewhere"
    assert get_state(host.http(other_tenant_key), theirs["id"]) == "input-required", "and nothing changed"


def get_state(http: httpx.Client, task_id: str) -> str:
    body = http.post(RPC, json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task_id}}).json()
    state: str = body["result"]["status"]["state"]
    return state


@pytest.mark.parametrize(
    ("type_name", "doc"),
    [
        ("Task", {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}, "kind": "task"}),
        ("Task", {"id": "t", "contextId": "c", "status": {"state": "working"}}),
        ("Task", {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}, "generation": 3}),
        ("StreamResponse", {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {}, "final": True}}),
        ("Message", {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "x"}]}),
        ("AgentCard", {"name": "x", "url": "http://x"}),
        ("JsonRpc:GetTask", {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "not found"}}),
    ],
    ids=["kind", "0.3-state", "unknown-field", "final", "0.3-part", "0.3-card-field", "error-without-errorinfo"],
)
def test_the_oracle_refuses_what_is_not_1_0(type_name: str, doc: Any) -> None:
    """The negative control: the oracle is strict, so its silence above means something."""
    with pytest.raises(AssertionError, match="not a valid A2A 1.0"):
        validate_v10(type_name, doc)
