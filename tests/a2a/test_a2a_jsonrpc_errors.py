"""Bad requests get the right answer (HTTP 401/403/413, or the right JSON-RPC code) and store nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a_wire import RPC, error, message, post, send, stream, wait_state
from harness import Host
from inproc import create_key
from schemas import a2a_validator


def _nothing_stored(http: httpx.Client) -> None:
    assert http.get("/v1/runs").json()["runs"] == []


def _raw(http: httpx.Client, content: bytes) -> dict[str, Any]:
    response = http.post(RPC, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    a2a_validator("JSONRPCErrorResponse").validate(body)
    return body


def test_credentials_are_checked_at_the_http_layer(host: Host, key: str) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message("hi")}}
    with host.client() as anonymous:
        missing = anonymous.post(RPC, json=call)
    with host.client("tk_0000000000000000_" + "0" * 64) as stranger:
        unknown = stranger.post(RPC, json=call)
    for response in (missing, unknown):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
    _nothing_stored(host.http(key))


def test_a_key_without_the_method_scope_is_refused_with_403(host: Host, key: str) -> None:
    reader = create_key(host.data_dir, "reader", "--scopes", "runs:read")
    with host.client(reader) as http:
        started = post(http, "message/send", {"message": message("hi")})
        replied = post(http, "message/send", {"message": message("yes", task_id="run_x")})
        cancelled = post(http, "tasks/cancel", {"id": "run_x"})
        read = post(http, "tasks/get", {"id": "run_x"})
    assert started.status_code == 403 and started.json()["details"]["scopeRequired"] == "runs:create"
    assert replied.status_code == 403 and replied.json()["details"]["scopeRequired"] == "approvals:respond"
    assert cancelled.status_code == 403 and cancelled.json()["details"]["scopeRequired"] == "runs:cancel"
    assert "lacks the scope" in started.json()["message"]
    assert read.status_code == 200 and read.json()["error"]["code"] == -32001
    _nothing_stored(host.http(key))


@pytest.mark.parametrize(
    ("content", "code", "needle"),
    [
        (b"{not json", -32700, "not valid JSON"),
        (b"", -32700, "not valid JSON"),
        (b'"a string"', -32600, "request object"),
        (b"42", -32600, "request object"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}]', -32600, "batch"),
        (b"[]", -32600, "batch"),
        (b'{"jsonrpc":"2.0","id":1,"params":{}}', -32600, "method"),
        (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600, "method"),
        (b'{"id":1,"method":"tasks/get","params":{"id":"x"}}', -32600, "jsonrpc"),
        (b'{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"x"}}', -32600, "id"),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tasks/get","params":{"id":"x"}}', -32600, "id"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}', -32601, "tasks/list"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":["x"]}', -32602, "object"),
    ],
)
def test_malformed_envelopes(http: httpx.Client, content: bytes, code: int, needle: str) -> None:
    body = _raw(http, content)
    assert body["error"]["code"] == code
    assert needle in body["error"]["message"]
    _nothing_stored(http)


def test_errors_echo_the_request_id_when_it_is_known(http: httpx.Client) -> None:
    assert _raw(http, b'{"jsonrpc":"2.0","id":"abc","method":"nope"}')["id"] == "abc"
    assert _raw(http, b'{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":5}}')["id"] == 7
    assert _raw(http, b"[1]")["id"] is None


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({}, "params.message"),
        ({"message": "hi"}, "params.message"),
        ({"message": {**message("hi"), "messageId": 5}}, "params.message.messageId"),
        ({"message": {**message("hi"), "role": "robot"}}, "params.message.role"),
        ({"message": {**message("hi"), "parts": {"kind": "text"}}}, "params.message.parts"),
        ({"message": {**message("hi"), "parts": [{"text": "no kind"}]}}, "params.message.parts.0"),
        ({"message": {**message("hi"), "parts": [{"kind": "text", "text": 3}]}}, "params.message.parts.0.text.text"),
        ({"message": {**message("hi"), "parts": [{"kind": "data", "data": [1]}]}}, "params.message.parts.0.data.data"),
        ({"message": {**message("hi"), "kind": "note"}}, "params.message.kind"),
        ({"message": message("hi"), "configuration": {"blocking": "true"}}, "params.configuration.blocking"),
        ({"message": message("hi"), "configuration": {"historyLength": "5"}}, "params.configuration.historyLength"),
        ({"message": message("hi"), "configuration": {"historyLength": -1}}, "params.configuration.historyLength"),
    ],
)
def test_wrong_param_types_name_the_field(http: httpx.Client, params: dict[str, Any], path: str) -> None:
    refused = error(http, "message/send", params)
    assert refused["code"] == -32602
    assert refused["message"].startswith(path), refused
    assert refused["data"]["errors"][0]["path"].startswith(path)
    _nothing_stored(http)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {}),
        ("tasks/get", {"id": 5}),
        ("tasks/get", {"id": "x", "historyLength": "2"}),
        ("tasks/cancel", {"id": ""}),
    ],
)
def test_task_params_are_checked(http: httpx.Client, method: str, params: dict[str, Any]) -> None:
    assert error(http, method, params)["code"] == -32602


def test_content_and_skill_refusals(http: httpx.Client) -> None:
    # file parts are taken (issue 26); one that is neither bytes nor a URI, or both, is not
    for file in ({"name": "a.pdf"}, {"uri": "https://example.com/a.pdf", "bytes": "aGk="}):
        file_part = {**message("x"), "parts": [{"kind": "file", "file": file}]}
        bad_file = error(http, "message/send", {"message": file_part})
        assert bad_file["code"] == -32602 and "exactly one of bytes (base64) or uri" in bad_file["message"], bad_file
    modes = error(
        http, "message/send", {"message": message("x"), "configuration": {"acceptedOutputModes": ["image/png"]}}
    )
    assert modes["code"] == -32005 and "text/plain" in modes["message"]
    unknown = error(http, "message/send", {"message": message("x", skill="no-such-skill")})
    assert unknown["code"] == -32602 and "echo" in unknown["message"]
    missing_input = error(http, "message/send", {"message": message(data={"other": 1}, skill="shape")})
    assert missing_input["code"] == -32602 and "prompt" in missing_input["message"]
    for url, arm in (("http://push.example.com/push", "scheme"), ("https://10.0.0.5/push", "address")):
        push = error(
            http, "message/send", {"message": message("x"), "configuration": {"pushNotificationConfig": {"url": url}}}
        )
        assert push["code"] == -32602 and f"{arm} arm" in push["message"], push
    for method in (
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    ):
        assert error(http, method, {"id": "run_nope", "pushNotificationConfigId": "c1"})["code"] == -32001
    _nothing_stored(http)


def test_huge_body_is_413_with_a_jsonrpc_error(start_host) -> None:  # type: ignore[no-untyped-def]
    # the A2A endpoint takes --max-body-bytes plus a message's files as base64 (here 3 bytes: 4 characters)
    host: Host = start_host("--max-body-bytes", "4096", "--a2a-file-message-bytes", "3")
    assert host.dev_key
    http = host.http(host.dev_key)
    response = post(http, "message/send", {"message": message("x" * 10_000)})
    assert response.status_code == 413
    body = response.json()
    a2a_validator("JSONRPCErrorResponse").validate(body)
    assert body["error"]["code"] == -32600 and "4100" in body["error"]["message"]
    _nothing_stored(http)


@pytest.mark.fresh_host  # it stores tasks, and every other test here checks the host stores none
def test_unknown_and_misused_tasks(http: httpx.Client) -> None:
    for method, params in (("tasks/get", {"id": "run_nope"}), ("tasks/cancel", {"id": "run_nope"})):
        assert error(http, method, params)["code"] == -32001
    assert error(http, "message/send", {"message": message("yes", task_id="run_nope")})["code"] == -32001
    done = send(http, message("hi"))
    assert done["status"]["state"] == "completed"
    not_cancelable = error(http, "tasks/cancel", {"id": done["id"]})
    assert not_cancelable["code"] == -32002 and "completed" in not_cancelable["message"]
    terminal_reply = error(http, "message/send", {"message": message(data={"action": "accept"}, task_id=done["id"])})
    assert terminal_reply["code"] == -32004 and "terminal" in terminal_reply["message"]
    working = send(http, message(skill="slow"), blocking=False)
    busy = error(http, "message/send", {"message": message(data={"action": "accept"}, task_id=working["id"])})
    assert busy["code"] == -32004 and "waits for no input" in busy["message"]
    stray_context = send(http, message("draft", skill="approval-gated"))
    wrong = error(
        http,
        "message/send",
        {"message": message(data={"action": "accept"}, task_id=stray_context["id"], context_id="ctx_other")},
    )
    assert wrong["code"] == -32602
    assert wait_state(http, stray_context["id"], "input-required")


def test_stream_methods_refuse_with_one_sse_error_event(http: httpx.Client) -> None:
    (resubscribe,) = stream(http, "tasks/resubscribe", {"id": "run_nope"})
    assert resubscribe.body["error"]["code"] == -32001 and resubscribe.id is None
    (bad,) = stream(http, "message/stream", {"message": {**message("hi"), "parts": "hi"}})
    assert bad.body["error"]["code"] == -32602
    (bad_sequence,) = stream(http, "tasks/resubscribe", {"id": "run_nope", "metadata": {"lastSequence": "x"}})
    assert bad_sequence.body["error"]["code"] in (-32001, -32602)
    _nothing_stored(http)
