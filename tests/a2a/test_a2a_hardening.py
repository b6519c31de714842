"""What A2A v0.3 callers (and the a2a-tck 0.3.x line) hit at the edges, each answered with the right code.

Empty messages, notifications, "not found" wording, reused message ids, unbounded ids and
echoes, and the opt-in public (keyless) agent. Every refusal is checked to have written
nothing: the runs listed over REST, the tasks read back, or their history.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from a2a_wire import RPC, WORKFLOWS, error, get_task, message, post, result, rpc, send, stream, wait_state
from harness import HostProcess, create_key
from schemas import a2a_validator

from tether.a2a.errors import TaskNotFound, a2a_error_from
from tether.errors import NotFound

#: each test checks that its refusals wrote nothing by listing every run: a host of its own each
pytestmark = pytest.mark.fresh_host

LONG = "x" * 900_000  # a 900 KB value: it must never come back


def _runs(http: httpx.Client) -> list[str]:
    response = http.get("/v1/runs")
    assert response.status_code == 200, response.text
    return sorted(r["runId"] for r in response.json()["runs"])


def _raw(http: httpx.Client, doc: Any) -> dict[str, Any]:
    """One request body as given (no id added), its JSON-RPC error answer checked by the schema."""
    response = http.post(RPC, content=orjson.dumps(doc), headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    a2a_validator("JSONRPCErrorResponse").validate(body)
    return body


def _history(http: httpx.Client, task_id: str) -> list[str]:
    return [m["messageId"] for m in get_task(http, task_id)["history"]]


# 1. a message with no parts ------------------------------------------------------------------


def test_a_message_without_parts_is_refused_before_a_skill_is_chosen(http: httpx.Client) -> None:
    empty = {**message("x", skill="slow"), "parts": []}  # "slow" needs no input: it would have run
    refused = error(http, "message/send", {"message": empty})
    assert refused["code"] == -32602
    assert refused["message"].startswith("params.message.parts is empty: a message needs at least one part")
    assert '"kind": "text"' in refused["message"]
    assert refused["data"]["errors"][0]["path"] == "params.message.parts"
    unknown_skill = error(http, "message/send", {"message": {**message("x", skill="no-such-skill"), "parts": []}})
    assert unknown_skill["code"] == -32602 and "parts is empty" in unknown_skill["message"]  # not the skill's error
    (streamed,) = stream(http, "message/stream", {"message": empty})
    assert streamed.body["error"]["code"] == -32602 and "parts is empty" in streamed.body["error"]["message"]
    assert _runs(http) == []
    gated = send(http, message("draft", skill="approval-gated"))
    reply = {**message(task_id=gated["id"]), "parts": []}
    assert error(http, "message/send", {"message": reply})["code"] == -32602
    assert get_task(http, gated["id"])["status"]["state"] == "input-required"
    assert _history(http, gated["id"]) == [gated["history"][0]["messageId"]]
    assert _runs(http) == [gated["id"]]


# 2. requests without an id, and the id of error answers ----------------------------------------


@pytest.mark.parametrize(
    ("doc", "code", "needle"),
    [
        ({"jsonrpc": "2.0", "method": "tasks/list", "params": {}}, -32601, "no method 'tasks/list'"),
        ({"jsonrpc": "2.0", "id": None, "method": "nope"}, -32601, "no method 'nope'"),
        ({"jsonrpc": "2.0", "method": "tasks/get", "params": {}}, -32602, "params.id"),
        ({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": 5}}, -32602, "params.id"),
        ({"jsonrpc": "2.0", "method": "tasks/get", "params": ["x"]}, -32602, "object"),
        ({"jsonrpc": "2.0", "method": "message/send", "params": {"message": "hi"}}, -32602, "params.message"),
        (
            {"jsonrpc": "2.0", "method": "message/send", "params": {"message": {**message("x"), "parts": []}}},
            -32602,
            "parts",
        ),
        (
            {
                "jsonrpc": "2.0",
                "method": "tasks/pushNotificationConfig/set",
                "params": {"taskId": "t", "pushNotificationConfig": {}},
            },
            -32602,
            "params.url",
        ),
        # a notification that is otherwise right is still refused for its missing id (as before)
        ({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "x"}}, -32600, "need an id"),
        ({"jsonrpc": "2.0", "method": "message/send", "params": {"message": message("hi")}}, -32600, "need an id"),
        ({"jsonrpc": "2.0", "id": None, "method": "tasks/get", "params": {"id": "x"}}, -32600, "need an id"),
    ],
)
def test_a_notification_is_judged_on_its_method_and_params_first(
    http: httpx.Client, doc: dict[str, Any], code: int, needle: str
) -> None:
    body = _raw(http, doc)
    assert body["id"] is None
    assert body["error"]["code"] == code, body
    assert needle in body["error"]["message"], body
    assert _runs(http) == []  # not even the well-formed message/send notification ran


def test_error_answers_echo_the_id_only_when_it_was_read(http: httpx.Client) -> None:
    for unreadable in ({"a": 1}, [1], True, 1.5):
        body = _raw(http, {"jsonrpc": "2.0", "id": unreadable, "method": "nope"})
        assert body["id"] is None and body["error"]["code"] == -32600 and "id" in body["error"]["message"]
    for readable in ("abc", 7, 0, ""):
        assert _raw(http, {"jsonrpc": "2.0", "id": readable, "method": "nope"})["id"] == readable
        assert _raw(http, {"jsonrpc": "2.0", "id": readable, "method": "tasks/get", "params": {}})["id"] == readable
        assert _raw(http, {"jsonrpc": "1.0", "id": readable, "method": "tasks/get"})["id"] == readable
    assert _raw(http, {"jsonrpc": "2.0", "id": "g", "method": "tasks/get", "params": {"id": "run_nope"}})["id"] == "g"
    (streamed,) = stream(http, "tasks/resubscribe", {"id": "run_nope"}, request_id=41)
    assert streamed.body["id"] == 41
    for body in (b"{oops", b"[]", b'"x"'):
        response = http.post(RPC, content=body, headers={"Content-Type": "application/json"})
        assert response.json()["id"] is None


# 3. TaskNotFound says "not found" ----------------------------------------------------------------


def test_every_task_not_found_says_not_found(start_host) -> None:  # type: ignore[no-untyped-def]
    host: HostProcess = start_host("--workflows", str(WORKFLOWS), "--egress-allow-cidr", "127.0.0.1/32")
    assert host.dev_key
    http = host.http(host.dev_key)
    mine = send(http, message("draft", skill="approval-gated"))
    stranger = create_key(host.data_dir, "stranger", "--tenant", "acme")
    push = {"url": "https://127.0.0.1:9/push"}
    with host.client(stranger) as theirs:
        for client, task_id in ((http, "run_nope"), (theirs, mine["id"])):
            reply = message(data={"action": "accept"}, task_id=task_id)
            answers = [
                error(client, "tasks/get", {"id": task_id}),
                error(client, "tasks/cancel", {"id": task_id}),
                error(client, "message/send", {"message": reply}),
                error(client, "tasks/pushNotificationConfig/set", {"taskId": task_id, "pushNotificationConfig": push}),
                error(client, "tasks/pushNotificationConfig/get", {"id": task_id}),
                error(client, "tasks/pushNotificationConfig/list", {"id": task_id}),
                error(client, "tasks/pushNotificationConfig/delete", {"id": task_id, "pushNotificationConfigId": "c"}),
                stream(client, "tasks/resubscribe", {"id": task_id})[0].body["error"],
                stream(client, "message/stream", {"message": reply})[0].body["error"],
            ]
            for answer in answers:
                assert answer["code"] == -32001, answer
                assert f"task {task_id!r} not found" in answer["message"], answer
                assert answer["data"] == {"taskId": task_id}
    assert get_task(http, mine["id"])["status"]["state"] == "input-required"
    assert _history(http, mine["id"]) == [mine["history"][0]["messageId"]]
    assert http.get(f"/v1/a2a/tasks/{mine['id']}").json().get("pushNotificationConfigs", []) == []


def test_engine_not_found_errors_say_not_found_too() -> None:
    """The engine's own NotFound (a run gone, an interrupt gone meanwhile) reaches callers as -32001 too."""
    for engine_message in ("no run 'run_x'", "run run_x is not waiting at node 'gate'", "workflow 'w' not found"):
        mapped = a2a_error_from(NotFound(engine_message))
        assert isinstance(mapped, TaskNotFound) and "not found" in mapped.message and engine_message in mapped.message


# 4. a reused messageId ------------------------------------------------------------------------------


def test_a_reused_message_id_with_other_content_is_refused(http: httpx.Client) -> None:
    first = send(http, message("once", message_id="dup-1"))
    assert send(http, message("once", message_id="dup-1"))["id"] == first["id"]  # the same message: its task
    for changed in (message("twice", message_id="dup-1"), message("once", message_id="dup-1", skill="slow")):
        body = rpc(http, "message/send", {"message": changed})
        refused = body["error"]
        assert refused["code"] == -32602
        assert "messageId 'dup-1' was already used for a message with different content" in refused["message"]
        assert "new messageId" in refused["message"]
        assert refused["data"] == {"reason": "idempotency_key_mismatch", "messageId": "dup-1", "taskId": first["id"]}
    (streamed,) = stream(http, "message/stream", {"message": message("twice", message_id="dup-1")})
    assert streamed.body["error"]["code"] == -32602
    assert _runs(http) == [first["id"]]
    assert _history(http, first["id"]) == ["dup-1"]
    assert get_task(http, first["id"])["history"][0]["parts"] == [{"kind": "text", "text": "once"}]


def test_a_reply_reusing_a_message_id_with_other_content_is_refused(http: httpx.Client) -> None:
    task = send(http, message("draft", skill="approval-gated", message_id="ask-1"))
    other = send(http, message("hello", message_id="other-1"))
    accept = {"action": "accept"}
    for reused, owner in (("ask-1", task["id"]), ("other-1", other["id"])):
        body = {"message": message(data=accept, task_id=task["id"], message_id=reused)}
        refused = error(http, "message/send", body)
        assert refused["code"] == -32602 and f"messageId {reused!r} was already used" in refused["message"]
        assert refused["data"]["taskId"] == owner
    assert get_task(http, task["id"])["status"]["state"] == "input-required"
    assert _history(http, task["id"]) == ["ask-1"]
    reply = message(data=accept, task_id=task["id"], context_id=task["contextId"], message_id="ok-1")
    assert send(http, reply)["status"]["state"] == "completed"
    again = send(http, reply)  # the same reply again: the task as it is, nothing decided twice
    assert again["status"]["state"] == "completed" and [m["messageId"] for m in again["history"]] == ["ask-1", "ok-1"]
    changed = message(data={"action": "reject"}, task_id=task["id"], message_id="ok-1")
    refused = error(http, "message/send", {"message": changed})
    assert refused["code"] == -32602 and refused["data"]["reason"] == "idempotency_key_mismatch"
    assert _history(http, task["id"]) == ["ask-1", "ok-1"]
    assert get_task(http, task["id"])["history"][1]["parts"] == [{"kind": "data", "data": accept}]
    assert _runs(http) == sorted([task["id"], other["id"]])


# 5. ids are bounded, and so is everything an error echoes -------------------------------------------


def test_task_and_config_ids_are_capped_at_128_characters(http: httpx.Client) -> None:
    too_long = "r" * 129
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("tasks/get", {"id": too_long}, "params.id"),
        ("tasks/cancel", {"id": too_long}, "params.id"),
        ("tasks/pushNotificationConfig/get", {"id": too_long}, "params.id"),
        (
            "tasks/pushNotificationConfig/get",
            {"id": "run_x", "pushNotificationConfigId": too_long},
            "params.pushNotificationConfigId",
        ),
        ("tasks/pushNotificationConfig/list", {"id": too_long}, "params.id"),
        ("tasks/pushNotificationConfig/delete", {"id": too_long, "pushNotificationConfigId": "c"}, "params.id"),
        (
            "tasks/pushNotificationConfig/delete",
            {"id": "run_x", "pushNotificationConfigId": too_long},
            "params.pushNotificationConfigId",
        ),
        (
            "tasks/pushNotificationConfig/set",
            {"taskId": too_long, "pushNotificationConfig": {"url": "https://a.test/"}},
            "params.taskId",
        ),
        ("message/send", {"message": message("x", task_id=too_long)}, "params.message.taskId"),
        (
            "message/send",
            {"message": {**message("x"), "referenceTaskIds": [too_long]}},
            "params.message.referenceTaskIds.0",
        ),
    ]
    for method, params, path in calls:
        refused = error(http, method, params)
        assert refused["code"] == -32602, (method, refused)
        assert refused["message"].startswith(path) and "at most 128 characters" in refused["message"], refused
    (streamed,) = stream(http, "tasks/resubscribe", {"id": too_long})
    assert streamed.body["error"]["code"] == -32602
    longest = "r" * 128  # still an id: unknown, and quoted whole
    found = error(http, "tasks/get", {"id": longest})
    assert found["code"] == -32001 and repr(longest) in found["message"]
    assert _runs(http) == []


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {"id": LONG}),
        ("tasks/cancel", {"id": LONG}),
        ("tasks/resubscribe", {"id": LONG}),
        ("tasks/pushNotificationConfig/delete", {"id": "run_x", "pushNotificationConfigId": LONG}),
        ("message/send", {"message": message("x", task_id=LONG)}),
        ("message/send", {"message": message("x", skill=LONG)}),
        ("message/send", {"message": message("x", context_id="c" * 300)}),
        ("message/send", {"message": {**message("x"), "parts": [{"kind": LONG, "text": "x"}]}}),
        ("message/send", {"message": {**message("x"), "role": LONG}}),
        ("message/send", {"message": message("x"), "configuration": {"acceptedOutputModes": [LONG]}}),
        ("message/send", {"message": message("x"), "configuration": {"pushNotificationConfig": {"url": LONG}}}),
        (LONG, {}),
    ],
    ids=[
        "get-id",
        "cancel-id",
        "resubscribe-id",
        "push-config-id",
        "reply-task-id",
        "skill",
        "context-id",
        "part-kind",
        "role",
        "output-modes",
        "push-url",
        "method",
    ],
)
def test_errors_never_echo_an_unbounded_value(http: httpx.Client, method: str, params: dict[str, Any]) -> None:
    response = post(http, method, params)
    assert response.status_code == 200
    assert len(response.content) < 4096, response.content[:300]
    if method == "tasks/resubscribe":
        (line,) = [line for line in response.text.splitlines() if line.startswith("data:")]
        body = orjson.loads(line[5:])
    else:
        body = response.json()
    a2a_validator("JSONRPCErrorResponse").validate(body)
    assert body["error"]["code"] in (-32601, -32602, -32005), body
    assert _runs(http) == []


def test_a_clipped_echo_still_says_what_is_expected(http: httpx.Client) -> None:
    tag = error(http, "message/send", {"message": {**message("x"), "parts": [{"kind": LONG, "text": "x"}]}})
    assert "x" * 128 + "…" in tag["message"] and "'text', 'file', 'data'" in tag["message"]
    method = _raw(http, {"jsonrpc": "2.0", "id": 1, "method": LONG})["error"]["message"]
    assert method.startswith("no method '" + "x" * 128 + "…'") and "message/send" in method
    skill = error(http, "message/send", {"message": message("x", skill=LONG)})
    assert skill["code"] == -32602 and "echo" in skill["message"] and len(skill["data"]["skillId"]) == 129
    many = error(http, "message/send", {"message": {**message("x"), "parts": [{"kind": "text", "text": 1}] * 5000}})
    assert len(many["data"]["errors"]) == 10 and many["data"]["errorCount"] == 5000
    assert _runs(http) == []


# 6. the public (keyless) agent --------------------------------------------------------------------------


def test_a_public_agent_serves_keyless_a2a_callers_as_one_anonymous_principal(start_host) -> None:  # type: ignore[no-untyped-def]
    host: HostProcess = start_host("--workflows", str(WORKFLOWS), "--a2a-anonymous-tenant", "public")
    assert host.dev_key  # of tenant "default"
    public_key = create_key(host.data_dir, "p", "--tenant", "public")
    with host.client() as keyless, host.client(public_key) as member, host.client(host.dev_key) as outsider:
        card = keyless.get("/.well-known/agent-card.json").json()
        a2a_validator("AgentCard").validate(card)
        assert "security" not in card
        assert card["securitySchemes"]["bearer"]["scheme"] == "bearer"  # a key is still honoured

        task = send(keyless, message("hello", message_id="pub-1"))
        assert task["status"]["state"] == "completed"
        assert get_task(keyless, task["id"])["id"] == task["id"]
        assert send(keyless, message("hello", message_id="pub-1"))["id"] == task["id"]  # idempotent per principal
        assert error(keyless, "message/send", {"message": message("other", message_id="pub-1")})["code"] == -32602
        assert get_task(member, task["id"])["status"]["state"] == "completed"  # it is tenant "public"'s
        assert error(outsider, "tasks/get", {"id": task["id"]})["code"] == -32001
        snapshot = member.get(f"/v1/runs/{task['id']}").json()
        assert snapshot["owner"] == {"tenant": "public", "principal": "anonymous"}

        gated = send(keyless, message("draft", skill="approval-gated"))
        reply = message(data={"action": "accept"}, task_id=gated["id"])
        assert send(keyless, reply)["status"]["state"] == "completed"  # approvals:respond
        slow = send(keyless, message("x", skill="slow"), blocking=False)
        assert result(keyless, "tasks/cancel", {"id": slow["id"]})["id"] == slow["id"]  # runs:cancel

        assert keyless.get("/v1/runs").status_code == 401  # REST still needs a key
        assert keyless.get(f"/v1/runs/{task['id']}").status_code == 401
        assert keyless.get(f"/v1/a2a/tasks/{task['id']}").status_code == 401
        assert keyless.post("/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "x"}}).status_code == 401
    with host.client("tk_0000000000000000_" + "0" * 64) as bad, host.client("not-a-key") as garbled:
        for client in (bad, garbled):
            refused = post(client, "message/send", {"message": message("hi")})
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    with host.client(public_key) as member:
        assert sorted(_runs(member)) == sorted([task["id"], gated["id"], slow["id"]])
    assert wait_state(host.http(public_key), slow["id"], "canceled")["status"]["state"] == "canceled"


def test_a_public_agent_keeps_the_extended_card_for_key_holders(start_host) -> None:  # type: ignore[no-untyped-def]
    """A2A: the client must authenticate for the extended card. Keyless callers of a public agent are refused it
    (401, as on a private agent), in every generation and binding, and the card they read does not advertise it."""
    host: HostProcess = start_host("--workflows", str(WORKFLOWS), "--a2a-anonymous-tenant", "public")
    public_key = create_key(host.data_dir, "p", "--tenant", "public")
    v10 = {"A2A-Version": "1.0"}
    with host.client() as keyless, host.client(public_key) as member:
        for headers in ({}, v10):
            card = keyless.get("/.well-known/agent-card.json", headers=headers).json()
            assert card["capabilities"]["extendedAgentCard"] is False
            assert card.get("supportsAuthenticatedExtendedCard", False) is False
        calls = [
            ({}, "agent/getAuthenticatedExtendedCard"),
            (v10, "GetExtendedAgentCard"),
            ({"A2A-Version": "1.1"}, "GetExtendedAgentCard"),
        ]
        for headers, method in calls:
            body = {"jsonrpc": "2.0", "id": 1, "method": method}
            refused = keyless.post(RPC, json=body, headers=headers)
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"].startswith("Bearer") and method in refused.json()["message"]
            extended = member.post(RPC, json=body, headers=headers).json()["result"]
            assert extended["capabilities"]["extendedAgentCard"] is True
        rest = keyless.get("/v1/a2a/rest/extendedAgentCard", headers=v10)
        assert rest.status_code == 401 and rest.json()["error"]["status"] == "UNAUTHENTICATED", rest.text
        assert rest.headers["www-authenticate"].startswith("Bearer")
        assert member.get("/v1/a2a/rest/extendedAgentCard", headers=v10).json()["capabilities"]["extendedAgentCard"]
        assert send(keyless, message("hello"))["status"]["state"] == "completed", "keyless tasks are still served"


def test_by_default_the_card_requires_a_key_and_keyless_a2a_is_401(host: HostProcess, http: httpx.Client) -> None:
    with host.client() as keyless:
        card = keyless.get("/.well-known/agent-card.json").json()
        refused = post(keyless, "message/send", {"message": message("hi")})
        # the key is checked first: a keyless caller learns nothing else, not even which versions are served
        for version in ("9.9", "1.0"):
            unversioned = keyless.post(RPC, json={"jsonrpc": "2.0", "id": 1}, headers={"A2A-Version": version})
            assert unversioned.status_code == 401 and "9.9" not in unversioned.text, unversioned.text
        rest = keyless.get("/v1/a2a/rest/tasks", headers={"A2A-Version": "9.9"})
        assert rest.status_code == 401 and rest.json()["error"]["status"] == "UNAUTHENTICATED", rest.text
        # nor does it make the host read its body, however large it says it is: refused before, the connection closed
        huge = b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":' + b" " * (64 << 20) + b"}"
        for path in (RPC, "/v1/a2a/rest/message:send"):
            unread = keyless.post(
                path, content=huge, headers={"content-type": "application/json", "A2A-Version": "1.0"}
            )
            assert unread.status_code == 401 and unread.headers["connection"] == "close", unread.text
    a2a_validator("AgentCard").validate(card)
    assert card["security"] == [{"bearer": []}]
    assert "optional" not in card["securitySchemes"]["bearer"]["description"]
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert _runs(http) == []


def test_the_anonymous_tenant_must_be_a_tenant_name(start_process) -> None:  # type: ignore[no-untyped-def]
    """Refused by ``tether serve`` itself, at start: a real process."""
    with pytest.raises(AssertionError, match="Invalid value for '--a2a-anonymous-tenant'"):
        start_process("--a2a-anonymous-tenant", "not a tenant!")
