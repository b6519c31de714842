"""The A2A endpoints as clients address them: trailing slashes, the wrong body type, the error media type.

httpx joins ``"/"`` onto a base URL as ``<base>/`` (the a2a-tck's JSON-RPC client posts every
call there), so ``/v1/a2a/`` is the endpoint itself, for both A2A versions, never a redirect
that would lose the body. The HTTP+JSON binding takes a route with a trailing slash too. A
body the binding cannot read is 415, and every HTTP+JSON error is a ``google.rpc.Status`` as
``application/json`` (A2A 1.0 §11.1/§11.6), while answers stay ``application/a2a+json``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from a2a_wire import check_response, message
from a2a_wire10 import user10
from harness import Host
from proto_oracle import validate_v10

REST = "/v1/a2a/rest"
V10 = {"A2A-Version": "1.0"}


def _card_interface(http: httpx.Client, binding: str) -> str:
    """The url the agent card gives for ``binding`` at A2A 1.0 (what the a2a-tck and 1.x SDKs call)."""
    card = http.get("/.well-known/agent-card.json").json()
    (url,) = [
        i["url"]
        for i in card["supportedInterfaces"]
        if i["protocolBinding"] == binding and i["protocolVersion"] == "1.0"
    ]
    assert not url.endswith("/"), url
    return str(url)


def _call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}


def _status_error(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    """An HTTP+JSON error: ``status``, a google.rpc.Status with that code and reason, as application/json."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == status and error["message"]
    assert error["details"][0]["reason"] == reason, error
    return error


def _task_count(http: httpx.Client) -> int:
    listed = http.get(f"{REST}/tasks", headers=V10)
    assert listed.status_code == 200, listed.text
    total: int = listed.json()["totalSize"]
    return total


def test_the_jsonrpc_endpoint_with_a_trailing_slash_is_the_endpoint(host: Host, key: str) -> None:
    url = _card_interface(host.http(key), "JSONRPC")
    # the way the a2a-tck and other httpx clients call it: base_url = the card's url, POST "/"
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        request = client.build_request("POST", "/", json={})
        assert request.url.path == "/v1/a2a/"

        sent = client.post("/", headers=V10, json=_call("SendMessage", {"message": user10("hi", skill="echo")}))
        assert sent.status_code == 200 and sent.headers["a2a-version"] == "1.0", sent.text
        validate_v10("JsonRpc:SendMessage", sent.json())
        task = sent.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["artifacts"][0]["parts"][0] == {"text": "hi"}

        legacy = client.post("/", json=_call("tasks/get", {"id": task["id"]}))
        assert legacy.status_code == 200 and legacy.headers["a2a-version"] == "0.3", legacy.text
        check_response("tasks/get", legacy.json())
        assert legacy.json()["result"]["status"]["state"] == "completed"

        started = client.post("/", json=_call("message/send", {"message": message("yo", skill="echo")}))
        check_response("message/send", started.json())
        assert started.json()["result"]["status"]["state"] == "completed"

        streamed = _call("SendStreamingMessage", {"message": user10("s")})
        with client.stream("POST", "/", headers=V10, json=streamed) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]
        assert "task" in events[0]["result"] and events[-1]["result"]["statusUpdate"]["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )

        # other verbs there are refused as on the bare path, never routed elsewhere
        refused = client.get("/")
        assert refused.status_code == 405 and refused.headers["allow"] == "POST"


def test_an_http_json_route_with_a_trailing_slash_is_the_route(http: httpx.Client) -> None:
    base = _card_interface(http, "HTTP+JSON").removeprefix(str(http.base_url).rstrip("/"))
    assert base == REST
    body = {"message": user10("slash", skill="echo")}
    sent = http.post(f"{base}/message:send/", headers=V10, json=body)
    assert sent.status_code == 200, sent.text
    assert sent.headers["content-type"] == "application/a2a+json"
    validate_v10("SendMessageResponse", sent.json())
    task = sent.json()["task"]

    got = http.get(f"{base}/tasks/{task['id']}/", headers=V10)
    assert got.status_code == 200 and got.json()["id"] == task["id"], got.text
    listed = http.get(f"{base}/tasks/", headers=V10)
    assert listed.status_code == 200 and task["id"] in [t["id"] for t in listed.json()["tasks"]], listed.text
    prefixed = http.get(f"{base}/default/tasks/{task['id']}/", headers=V10)
    assert prefixed.status_code == 200 and prefixed.json()["id"] == task["id"], prefixed.text
    # a slash is not a path segment: the base itself is still no route
    _status_error(http.get(f"{base}/", headers=V10), 404, "METHOD_NOT_FOUND")


def test_a_body_the_binding_cannot_read_is_415_and_writes_nothing(http: httpx.Client) -> None:
    before = _task_count(http)
    body = json.dumps({"message": user10("typed", skill="echo")}).encode()
    for media in ("text/plain", "application/x-www-form-urlencoded", "application/xml; charset=utf-8"):
        refused = http.post(f"{REST}/message:send", headers={**V10, "content-type": media}, content=body)
        error = _status_error(refused, 415, "CONTENT_TYPE_NOT_SUPPORTED")
        assert error["status"] == "INVALID_ARGUMENT"
        assert media.split(";")[0] in error["message"] and "application/a2a+json" in error["message"]
        assert refused.headers["a2a-version"] == "1.0"
    untyped = http.post(f"{REST}/message:stream", headers=V10, content=body)
    _status_error(untyped, 415, "CONTENT_TYPE_NOT_SUPPORTED")
    assert _task_count(http) == before, "a refused message starts no task"
    # both JSON media types are read
    for media in ("application/a2a+json", "application/json; charset=utf-8"):
        fresh = json.dumps({"message": user10("typed", skill="echo")})
        answered = http.post(f"{REST}/message:send", headers={**V10, "content-type": media}, content=fresh)
        assert answered.status_code == 200, answered.text


def test_http_json_errors_are_application_json_and_answers_application_a2a_json(host: Host, http: httpx.Client) -> None:
    unknown = f"run_{uuid.uuid4().hex}"
    _status_error(http.get(f"{REST}/tasks/{unknown}", headers=V10), 404, "TASK_NOT_FOUND")
    _status_error(http.get(f"{REST}/tasks/{unknown}", headers={"A2A-Version": "99.0"}), 400, "VERSION_NOT_SUPPORTED")
    _status_error(http.get(f"{REST}/nowhere", headers=V10), 404, "METHOD_NOT_FOUND")
    _status_error(http.post(f"{REST}/message:send", headers=V10, json={"message": {}}), 400, "INVALID_PARAMS")
    not_allowed = _status_error(http.delete(f"{REST}/tasks", headers=V10), 405, "METHOD_NOT_ALLOWED")
    assert not_allowed["status"] == "UNIMPLEMENTED"
    with host.client() as client:
        keyless = client.get(f"{REST}/tasks/{unknown}", headers=V10)
    assert keyless.status_code == 401 and keyless.headers["content-type"] == "application/json"
    assert keyless.json()["error"]["status"] == "UNAUTHENTICATED"

    answered = http.get(f"{REST}/tasks", headers=V10)
    assert answered.status_code == 200 and answered.headers["content-type"] == "application/a2a+json"


def test_a_1_0_jsonrpc_body_typed_as_something_else_is_32005_and_writes_nothing(http: httpx.Client) -> None:
    before = _task_count(http)
    call = _call("SendMessage", {"message": user10("typed", skill="echo")})
    refused = http.post("/v1/a2a", headers={**V10, "content-type": "text/plain"}, content=json.dumps(call))
    assert refused.status_code == 200 and refused.headers["a2a-version"] == "1.0"
    body = refused.json()
    validate_v10("JsonRpc:SendMessage", body)
    assert body["id"] == call["id"] and body["error"]["code"] == -32005, body
    assert (
        body["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED" and "text/plain" in body["error"]["message"]
    )
    assert _task_count(http) == before, "a refused message starts no task"
    # JSON by any of its names, or no type at all, is read; 0.3 callers are read whatever they say
    for media in ("application/json; charset=utf-8", "application/a2a+json", None):
        fresh = _call("SendMessage", {"message": user10("typed", skill="echo")})
        headers = {**V10, **({"content-type": media} if media else {})}
        answered = http.post("/v1/a2a", headers=headers, content=json.dumps(fresh)).json()
        assert answered["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", (media, answered)
    legacy = _call("message/send", {"message": message("typed", skill="echo")})
    served = http.post("/v1/a2a", headers={"content-type": "text/plain"}, content=json.dumps(legacy)).json()
    check_response("message/send", served)
    assert served["result"]["status"]["state"] == "completed"


def test_a_body_over_the_limit_is_413_in_each_bindings_own_shape(start_host: Any) -> None:
    host: Host = start_host("--max-body-bytes", "1024", "--a2a-file-message-bytes", "1024")
    limit = 1024 + 4 * -(-1024 // 3)  # the A2A body limit admits a message's files as base64
    assert host.dev_key
    http = host.http(host.dev_key)
    big = {"message": user10("x" * (limit + 1), skill="echo")}
    refused = http.post(f"{REST}/message:send", headers=V10, json=big)
    error = _status_error(refused, 413, "INVALID_REQUEST")
    assert error["status"] == "INVALID_ARGUMENT" and str(limit) in error["message"]
    assert error["details"][0]["metadata"] == {"maxBodyBytes": str(limit)}
    # the JSON-RPC endpoint, with or without its slash, answers a JSON-RPC error at 413
    for path in ("/v1/a2a", "/v1/a2a/"):
        rpc = http.post(path, headers=V10, json=_call("SendMessage", big))
        assert rpc.status_code == 413 and rpc.json()["error"]["code"] == -32600, rpc.text
    assert _task_count(http) == 0
