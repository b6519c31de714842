"""A2A pushes to a real HTTPS receiver: guarded, durable, ordered, credentials by reference.

The receiver listens on 127.0.0.1 with a test CA; the host is allowed to reach it only
through the two operator switches (``--egress-allow-cidr``, ``--egress-ca-bundle``).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import httpx
from a2a_wire import WORKFLOWS, error, get_task, message, result, send
from backends import Hosts
from harness import Host, HostProcess, wait_until
from inproc import InProcessHost, create_key, run_cli
from receiver import Receiver, egress_to
from schemas import a2a_validator, openwop_validator

TOKEN = "tok-9f8e7d6c5b4a-raw-token"
CREDENTIALS = "cred-0a1b2c3d-raw-credentials"
H = TypeVar("H", bound=Host)


def _push_host(start_host: Hosts[H], receiver: Receiver, *extra: str) -> H:
    host = start_host(
        "--workflows",
        str(WORKFLOWS),
        *egress_to(receiver),
        "--push-retry-schedule",
        "300ms,600ms,1s",
        *extra,
    )
    return host


def _config(receiver: Receiver, **extra: Any) -> dict[str, Any]:
    return {
        "url": receiver.url(),
        "token": TOKEN,
        "authentication": {"schemes": ["Bearer"], "credentials": CREDENTIALS},
        **extra,
    }


def _pushes(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(body) for body in receiver.bodies()]


def test_input_required_and_completed_are_pushed_with_credentials(
    start_host: Hosts[InProcessHost], receiver: Receiver
) -> None:
    host = _push_host(start_host, receiver)
    http = host.http(host.dev_key)
    task = send(http, message("draft", skill="approval-gated"), blocking=True, pushNotificationConfig=_config(receiver))
    assert task["status"]["state"] == "input-required"
    wait_until(lambda: len(receiver.requests) >= 1, what="the input-required push")
    first = receiver.requests[0]
    assert first.headers["x-a2a-notification-token"] == TOKEN
    assert first.headers["authorization"] == f"Bearer {CREDENTIALS}"
    assert first.headers["content-type"] == "application/json"
    assert first.headers["webhook-id"]
    event = json.loads(first.body)
    a2a_validator("TaskStatusUpdateEvent").validate(event)
    assert event["taskId"] == task["id"] and event["status"]["state"] == "input-required" and event["final"] is False
    assert event["metadata"]["openwop"]["interrupt"]["kind"] == "approval"

    send(http, message(data={"action": "accept"}, task_id=task["id"]))
    wait_until(lambda: len(receiver.requests) >= 2, what="the completed push")
    done = json.loads(receiver.requests[1].body)
    a2a_validator("TaskStatusUpdateEvent").validate(done)
    assert done["status"]["state"] == "completed" and done["final"] is True
    assert [p["status"]["state"] for p in _pushes(receiver)] == ["input-required", "completed"]
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 2

    configs = result(http, "tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert isinstance(configs, list) and len(configs) == 1
    record = http.get(f"/v1/a2a/tasks/{task['id']}").json()
    openwop_validator("a2a-task-state").validate(record)
    assert record["pushConfig"]["url"] == receiver.url() and 0 < len(record["pushConfig"]["tokenFingerprint"]) <= 32

    # the raw token and credentials appear nowhere: not in the database, the logs or any answer
    answers = [
        json.dumps(get_task(http, task["id"])),
        json.dumps(configs),
        json.dumps(result(http, "tasks/pushNotificationConfig/get", {"id": task["id"]})),
        json.dumps(record),
        http.get(f"/v1/runs/{task['id']}/events/poll", params={"timeout": 0}).text,
        http.get("/v1/deliveries").text,
    ]
    host.stop()
    stored = host.stored_bytes()
    for secret in (TOKEN, CREDENTIALS):
        assert secret.encode() not in stored, "a raw secret is in the data directory"
        assert secret not in host.log()
        assert all(secret not in answer for answer in answers)


def test_full_task_body_and_several_configs(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    host = _push_host(start_host, receiver, "--push-body", "task")
    http = host.http(host.dev_key)
    task = send(http, message("x", skill="approval-gated"), blocking=True)
    for config_id, path in (("first", "/a"), ("second", "/b")):
        stored = result(
            http,
            "tasks/pushNotificationConfig/set",
            {"taskId": task["id"], "pushNotificationConfig": {"id": config_id, "url": receiver.url(path)}},
        )
        a2a_validator("TaskPushNotificationConfig").validate(stored)
    minted = result(
        http,
        "tasks/pushNotificationConfig/set",
        {"taskId": task["id"], "pushNotificationConfig": {"url": receiver.url("/c")}},
    )
    assert minted["pushNotificationConfig"]["id"]
    assert (
        result(http, "tasks/pushNotificationConfig/get", {"id": task["id"]})["pushNotificationConfig"]["id"] == "first"
    )
    assert rpc_delete(http, task["id"], minted["pushNotificationConfig"]["id"]) is None
    send(http, message(data={"approve": True}, task_id=task["id"]))
    wait_until(lambda: len(receiver.bodies("/a")) == 1 and len(receiver.bodies("/b")) == 1, what="one push per config")
    for body in receiver.bodies("/a") + receiver.bodies("/b"):
        pushed = json.loads(body)
        a2a_validator("Task").validate(pushed)
        assert pushed["status"]["state"] == "completed" and "history" in pushed and pushed["history"] == []
    assert receiver.bodies("/c") == [], "a deleted config receives nothing"


def rpc_delete(http: httpx.Client, task_id: str, config_id: str) -> Any:
    response = http.post(
        "/v1/a2a",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/pushNotificationConfig/delete",
            "params": {"id": task_id, "pushNotificationConfigId": config_id},
        },
    )
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def test_receiver_down_retries_then_arrives_even_across_a_crash(
    start_process: Hosts[HostProcess], receiver: Receiver
) -> None:
    host = _push_host(start_process, receiver)
    http = host.http(host.dev_key)
    receiver.stop()
    task = send(http, message("x", skill="approval-gated"), blocking=True, pushNotificationConfig=_config(receiver))
    wait_until(
        lambda: any(d["attempts"] >= 1 for d in http.get("/v1/deliveries").json()["deliveries"]),
        what="a failed attempt",
    )
    host.kill()  # during the backoff
    receiver.start()
    host.start()
    http = host.http(host.dev_key)
    wait_until(lambda: len(receiver.requests) >= 1, timeout=20, what="the push after the restart")
    wait_until(
        lambda: http.get("/v1/deliveries", params={"status": "delivered"}).json()["deliveries"],
        what="the delivery to be recorded",
    )
    assert len(receiver.requests) == 1, "exactly once per attempt that succeeded"
    assert json.loads(receiver.requests[0].body)["taskId"] == task["id"]


def test_redirects_are_failures_and_dead_letters_can_be_redelivered(
    start_host: Hosts[InProcessHost], receiver: Receiver
) -> None:
    host = _push_host(start_host, receiver)
    key = host.dev_key
    assert key
    http = host.http(key)
    receiver.script = lambda r: (302, {"Location": receiver.url("/elsewhere")}) if r.path == "/push" else (204, {})
    send(http, message("x", skill="approval-gated"), blocking=True, pushNotificationConfig=_config(receiver))
    dead = wait_until(
        lambda: http.get("/v1/deliveries", params={"status": "dead"}).json()["deliveries"],
        timeout=20,
        what="the dead letter",
    )
    assert receiver.bodies("/elsewhere") == [], "a redirect is never followed"
    assert len(receiver.bodies("/push")) == 4, "one attempt and three retries on the ladder"
    assert dead[0]["attempts"] == 4 and "302" in dead[0]["lastError"]
    listed = run_cli("push", "list", "--status", "dead", "--url", host.url, "--key", key, data_dir=host.data_dir)
    assert dead[0]["deliveryId"] in listed.stdout
    receiver.script = [204]
    run_cli("push", "redeliver", dead[0]["deliveryId"], "--url", host.url, "--key", key, data_dir=host.data_dir)
    wait_until(
        lambda: http.get("/v1/deliveries", params={"status": "delivered"}).json()["deliveries"], what="the redelivery"
    )


REFUSED = [
    ("http://push.example.com/push", "scheme"),
    ("https://10.0.0.5/push", "address"),
    ("https://127.0.0.1/push", "address"),
    ("https://[::1]/push", "address"),
    ("https://localhost/push", "address"),
    ("https://metadata.google.internal/x", "address"),
    ("https://metadata/x", "address"),
    ("https://169.254.169.254/latest/meta-data/", "address"),
    ("https://192.168.1.1/x", "address"),
    ("https://172.16.0.1/x", "address"),
    ("https://100.64.0.1/x", "address"),
    ("https://0.0.0.0/x", "address"),
    ("https://224.0.0.1/x", "address"),
    ("https://192.0.2.1/x", "address"),
    ("https://[fd00::1]/x", "address"),
    ("https://[fe80::1]/x", "address"),
    ("https://[::ffff:7f00:1]/x", "address"),
    ("https://[::ffff:a9fe:a9fe]/x", "address"),
    ("https://[64:ff9b::a00:1]/x", "address"),
    ("https://[2002:a00:1::]/x", "address"),
    ("https://[ff02::1]/x", "address"),
    ("https://user:pw@push.example.com/x", "url"),
    ("https://2130706433/x", "url"),
    ("https://0x7f.0.0.1/x", "url"),
    ("https://127.1/x", "url"),
]


def test_every_blocked_class_is_refused_without_the_allow_switch(start_host: Hosts[InProcessHost]) -> None:
    host: Host = start_host("--workflows", str(WORKFLOWS))
    http = host.http(host.dev_key)
    task = send(http, message("x", skill="approval-gated"), blocking=True)
    for url, arm in REFUSED:
        refused = error(
            http, "tasks/pushNotificationConfig/set", {"taskId": task["id"], "pushNotificationConfig": {"url": url}}
        )
        assert refused["code"] == -32602 and f"{arm} arm" in refused["message"], (url, refused)
        hook = http.post("/v1/webhooks", json={"url": url, "events": ["run.completed"]})
        assert hook.status_code == 400 and hook.json()["error"] == "webhook_url_rejected", (url, hook.text)
    assert result(http, "tasks/pushNotificationConfig/list", {"id": task["id"]}) == []


def test_another_tenants_config_reads_as_unknown(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    host = _push_host(start_host, receiver)
    http = host.http(host.dev_key)
    task = send(http, message("x", skill="approval-gated"), blocking=True)
    result(
        http,
        "tasks/pushNotificationConfig/set",
        {"taskId": task["id"], "pushNotificationConfig": {"id": "mine", "url": receiver.url()}},
    )
    stranger = host.http(create_key(host.data_dir, "stranger", "--tenant", "acme"))
    known = error(stranger, "tasks/pushNotificationConfig/get", {"id": task["id"], "pushNotificationConfigId": "mine"})
    unknown = error(
        stranger, "tasks/pushNotificationConfig/get", {"id": "run_nope", "pushNotificationConfigId": "mine"}
    )
    assert known["code"] == unknown["code"] == -32001
    assert (
        error(
            stranger,
            "tasks/pushNotificationConfig/set",
            {"taskId": task["id"], "pushNotificationConfig": {"url": receiver.url()}},
        )["code"]
        == -32001
    )
