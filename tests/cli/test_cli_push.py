"""``tether push list`` filters by kind: webhooks, A2A pushes and run callbacks, several of each, on both stores.

A real in-process host delivers every kind to a real HTTPS receiver; the CLI lists them
through the REST API as an operator would, and the filter is the store's (it applies
before ``--limit``, not to a page already cut).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

from backends import Hosts
from click.testing import CliRunner, Result
from harness import wait_until
from inproc import InProcessHost
from receiver import Receiver, egress_to

from tether.cli.main import cli


def push_list(host: InProcessHost, *args: str) -> Result:
    assert host.dev_key
    return CliRunner().invoke(cli, ["push", "list", *args, "--url", host.url, "--key", host.dev_key])


def listed(host: InProcessHost, *args: str) -> list[dict[str, Any]]:
    result = push_list(host, *args, "--json")
    assert result.exit_code == 0, result.output
    items: list[dict[str, Any]] = json.loads(result.stdout)
    return items


def a2a_task_with_push(host: InProcessHost, receiver: Receiver) -> None:
    """An approval-gated task handed over A2A with a push config: pushed when it asks for input."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"m-{uuid.uuid4().hex}",
        "parts": [{"kind": "text", "text": "publish"}],
        "metadata": {"skillId": "approval-gated"},
    }
    configuration = {"blocking": True, "pushNotificationConfig": {"url": receiver.url("/push")}}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": message, "configuration": configuration},
    }
    assert "result" in host.http(host.dev_key).post("/v1/a2a", json=body).json()


def test_push_list_kind_lists_only_that_kind(start_host: Hosts[InProcessHost], receiver: Receiver) -> None:
    host = start_host(*egress_to(receiver))
    http = host.http(host.dev_key)
    hooked = http.post("/v1/webhooks", json={"url": receiver.url("/hook"), "events": ["run.started"]})
    assert hooked.status_code == 201, hooked.text
    for _ in range(2):  # each: a callback when it waits, and a webhook for run.started
        created = http.post(
            "/v1/runs",
            json={"workflowId": "approval-gated", "inputs": {"prompt": "p"}, "callbackUrl": receiver.url("/cb")},
        )
        assert created.status_code == 201, created.text
        a2a_task_with_push(host, receiver)  # each: a push when it asks for input, and a webhook for run.started

    def counted() -> Counter[str] | None:
        kinds = Counter(d["kind"] for d in http.get("/v1/deliveries").json()["deliveries"])
        return kinds if kinds["webhook"] >= 4 and kinds["callback"] >= 2 and kinds["a2a-push"] >= 2 else None

    wait_until(counted, what="two deliveries of each kind at least")
    every = http.get("/v1/deliveries").json()["deliveries"]
    for kind in ("webhook", "a2a-push", "callback"):
        expected = [d["deliveryId"] for d in every if d["kind"] == kind]
        assert [d["deliveryId"] for d in listed(host, "--kind", kind)] == expected, kind
        newest = listed(host, "--kind", kind, "--limit", "1")
        assert [(d["deliveryId"], d["kind"]) for d in newest] == [(expected[0], kind)], "filtered before the limit"
        table = push_list(host, "--kind", kind)
        assert table.exit_code == 0, table.output
        assert all(delivery_id in table.stdout for delivery_id in expected)
        others = [d["deliveryId"] for d in every if d["kind"] != kind]
        assert not any(delivery_id in table.stdout for delivery_id in others), table.stdout
    assert listed(host, "--kind", "callback", "--status", "dead") == []
    assert push_list(host, "--kind", "callback", "--status", "dead").stdout == (
        "no deliveries in state dead of kind callback\n"
    )


def test_an_unknown_kind_is_refused_by_the_cli_and_the_api(start_host: Hosts[InProcessHost]) -> None:
    host = start_host()
    refused = push_list(host, "--kind", "email")
    assert refused.exit_code == 2 and "'email' is not one of 'webhook', 'a2a-push', 'callback'" in refused.output
    answer = host.http(host.dev_key).get("/v1/deliveries", params={"kind": "email"})
    assert answer.status_code == 400 and answer.json()["error"] == "validation_error", answer.text
