"""OpenWOP webhooks through the same guard and outbox: registered with openwop-client,
delivered to a real HTTPS receiver, signed so that ``webhook_helpers`` verifies them."""

from __future__ import annotations

import json

import pytest
from backends import Hosts
from harness import Host, wait_until
from inproc import InProcessHost
from openwop_client import OpenwopClient
from openwop_client.errors import WopError
from openwop_client.types import CreateRunRequest, RegisterWebhookRequest
from openwop_client.webhook_helpers import read_webhook_headers, verify_webhook_signature
from receiver import Receiver


def test_signed_deliveries_verify_with_the_client_helpers(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    host: Host = start_host("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(receiver.ca_file))
    assert host.dev_key
    client = OpenwopClient(host.url, host.dev_key)
    hook = client.webhooks_register(
        RegisterWebhookRequest(url=receiver.url("/hook"), events=["run.started", "run.completed"])
    )
    assert hook.eventTypes == ["run.started", "run.completed"] and len(hook.secret) >= 32
    run = client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": "hi"}))
    wait_until(lambda: len(receiver.requests) >= 2, what="two deliveries")
    bodies = [json.loads(r.body) for r in receiver.requests]
    assert [b["event"]["type"] for b in bodies] == ["run.started", "run.completed"], (
        "in sequence order, only subscribed types"
    )
    assert all(b["runId"] == run.runId and b["workspaceId"] == "default" for b in bodies)
    for request in receiver.requests:
        found = read_webhook_headers(request.headers)
        assert found is not None
        assert verify_webhook_signature(hook.secret, found[0], found[1], request.body).valid
        assert verify_webhook_signature(
            hook.secret, request.headers["x-openwop-signature"], request.headers["x-openwop-timestamp"], request.body
        ).valid
        assert not verify_webhook_signature("x" * 64, found[0], found[1], request.body).valid
        assert request.headers["x-openwop-webhook-id"] == hook.subscriptionId
        assert request.headers["x-openwop-signature-algorithm"] == "v1"
    assert hook.secret not in host.log()

    client.webhooks_unregister(hook.subscriptionId, tenant_id="default")
    with pytest.raises(WopError) as gone:
        client.webhooks_unregister(hook.subscriptionId, tenant_id="default")
    assert gone.value.status == 404 and gone.value.envelope and gone.value.envelope.error == "subscription_not_found"
    client.runs_create(CreateRunRequest(workflowId="echo", inputs={"prompt": "after"}))
    wait_until(lambda: client.runs_get(run.runId).status == "completed", what="the run")
    assert len(receiver.requests) == 2, "an unsubscribed URL receives nothing more"


def test_registration_refusals(host: Host, key: str) -> None:
    http = host.http(key)
    for body, code in (
        ({"url": "http://127.0.0.1:65535/", "events": ["run.completed"]}, "webhook_url_rejected"),
        ({"url": "not a url", "events": ["run.completed"]}, "webhook_url_rejected"),
        ({"events": ["run.completed"]}, "validation_error"),
        ({"url": "https://hooks.example.com/x", "events": []}, "validation_error"),
    ):
        response = http.post("/v1/webhooks", json=body)
        assert response.status_code == 400 and response.json()["error"] == code, (body, response.text)
    assert http.delete("/v1/webhooks/wh-does-not-exist").json()["error"] == "subscription_not_found"


def test_callback_url_is_told_of_each_suspension(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    host: Host = start_host("--egress-allow-cidr", "127.0.0.1/32", "--egress-ca-bundle", str(receiver.ca_file))
    http = host.http(host.dev_key)
    created = http.post(
        "/v1/runs", json={"workflowId": "approval-gated", "inputs": {"prompt": "p"}, "callbackUrl": receiver.url("/cb")}
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["runId"]
    wait_until(lambda: receiver.bodies("/cb"), what="the callback")
    told = json.loads(receiver.bodies("/cb")[0])
    assert told["runId"] == run_id and told["interrupt"]["kind"] == "approval" and told["interrupt"]["nodeId"] == "gate"
    answer = host.http().post(f"/v1/interrupts/{told['interruptToken']}", json={"resumeValue": {"action": "accept"}})
    assert answer.status_code == 200, answer.text
    wait_until(lambda: http.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to complete")
    refused = http.post(
        "/v1/runs", json={"workflowId": "echo", "inputs": {"prompt": "p"}, "callbackUrl": "http://hooks.example.com/cb"}
    )
    assert refused.status_code == 400 and "scheme arm" in refused.json()["message"]
