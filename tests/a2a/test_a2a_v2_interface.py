"""The A2A interface the OpenWOP v2 root advertises (``/a2a``): RFC 0208's operation map, RFC 0211's ErrorInfo.

Raw JSON-RPC over httpx, as the official v2 scenarios (``v2-a2a-operation-map``,
``v2-refresh-sla``) speak it: the root's ``a2a`` record leads to the card, the card to the
one interface it lists, and there ``Task.id`` is the bound run id that ``GET /runs/{id}``
reads. A task bound to another tenant, or another tenant's real task, is answered exactly
as an unknown one; every error carries one ``google.rpc.ErrorInfo``; nothing answered
there, not even a refusal before dispatch, is the OpenWOP envelope.
"""

from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from backends import Hosts, suite_host
from harness import Host, wait_until
from inproc import InProcessHost
from keys import made_key
from node_client import NodeProject
from receiver import Receiver, egress_to
from sdk13_driver import Sdk13, SdkRefused

from tether.a2a.capabilities import VERSIONS_REVIEWED

V2 = {"OpenWOP-Version": "2.0"}
INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def record(host: Host) -> dict[str, Any]:
    with host.client() as anonymous:
        found: dict[str, Any] = anonymous.get("/.well-known/openwop", headers=V2).json()["a2a"]
    return found


def interface(host: Host) -> str:
    """The JSON-RPC 1.0 interface the card at ``agentCardUrl`` lists (the scenario's way there)."""
    card = httpx.get(record(host)["agentCardUrl"], headers={"A2A-Version": "1.0"}).json()
    [only] = card["supportedInterfaces"]
    assert only["protocolBinding"] == "JSONRPC" and only["protocolVersion"] == "1.0"
    url: str = only["url"]
    return url


def rpc(url: str, key: str | None, method: str, params: dict[str, Any], version: str | None = "1.0") -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(url, headers=headers, content=orjson.dumps(body), timeout=30)


def task_of(answer: httpx.Response) -> dict[str, Any]:
    doc = answer.json()
    assert "result" in doc, doc
    result: dict[str, Any] = doc["result"]
    task: dict[str, Any] = result.get("task", result)
    return task


def error_of(answer: httpx.Response) -> dict[str, Any]:
    doc = answer.json()
    assert "error" in doc and "jsonrpc" in doc, doc
    error: dict[str, Any] = doc["error"]
    return error


def info(error: dict[str, Any]) -> dict[str, Any]:
    infos = [d for d in error["data"] if d.get("@type") == INFO]
    assert len(infos) == 1 and all("@type" in d for d in error["data"]), error
    found: dict[str, Any] = infos[0]
    assert found["domain"] == "a2a-protocol.org" and found["reason"] == found["reason"].upper()
    return found


def normalised(error: dict[str, Any], asked: str) -> list[Any]:
    """What the scenario compares (RFC 0211 §D): per detail its type, reason, domain and metadata keys."""
    return [
        (
            d["@type"],
            d.get("reason"),
            d.get("domain"),
            sorted(k for k, v in d.get("metadata", {}).items() if v != asked),
        )
        for d in error["data"]
    ]


def message(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


def gated(url: str, key: str) -> dict[str, Any]:
    sent = rpc(url, key, "SendMessage", {"message": message("publish", metadata={"skillId": "approval-gated"})})
    task = task_of(sent)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


def test_the_v2_root_advertises_1_0_at_the_bound_interface_and_its_card_says_the_same(host: Host) -> None:
    a2a = record(host)
    assert a2a["versions"] == ["1.0"] and a2a["preferredVersion"] == "1.0" and a2a["minimumVersion"] == "1.0"
    assert a2a["profiles"] == ["a2a-1.0"] and a2a["witness"] == "seam-gated" and "supported" not in a2a
    # the refresh SLA (v2-refresh-sla): a date, not in the future, at most 90 days old
    refreshed = datetime.date.fromisoformat(a2a["refreshedAt"])
    age = (datetime.datetime.now(datetime.UTC).date() - refreshed).days
    assert refreshed == VERSIONS_REVIEWED and 0 <= age <= 90, (
        f"refreshedAt {refreshed} is {age} days old: check the A2A versions /a2a offers against A2A's released "
        "versions and move tether.a2a.capabilities.VERSIONS_REVIEWED (RFC 0175 §D.4)"
    )
    answer = httpx.get(a2a["agentCardUrl"], headers={"A2A-Version": "1.0"})
    assert answer.status_code == 200 and "openwop-version" not in answer.headers
    card = answer.json()
    assert card["supportedInterfaces"] == [
        {"url": f"{host.url}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ], "only the interface routed there, 1.0 JSON-RPC"
    assert "url" not in card and "protocolVersion" not in card, "the strict 1.0 card"
    for facet in ("streaming", "pushNotifications"):
        assert card["capabilities"][facet] is a2a[facet], facet
    assert a2a["durableTasks"] is True
    # the v1 document keeps RFC 0100's block as it was, 0.3 included, and /v1/a2a still answers 0.3
    with host.client() as anonymous:
        v1 = anonymous.get("/.well-known/openwop").json()["a2a"]
    assert v1["supported"] is True and v1["protocolVersions"] == ["1.0", "0.3"]


def test_task_ids_are_bound_run_ids_that_the_v2_run_reads(host: Host, key: str) -> None:
    url = interface(host)
    task = gated(url, key)
    tenant, _, opaque = task["id"].partition("/")
    assert tenant == "default" and opaque.startswith("run_"), task["id"]
    assert task["history"][0]["taskId"] == task["id"], "every taskId an answer names is bound"
    with host.client(key) as client:
        run = client.get(f"/runs/{task['id'].replace('/', '~2F')}", headers=V2).json()
    assert run["runId"] == task["id"] and run["status"] == "waiting-approval"
    # GetTask by the bound id (and by the bare one, under the caller's own tenant, as a v2 path reads it)
    assert task_of(rpc(url, key, "GetTask", {"id": task["id"]}))["id"] == task["id"]
    assert task_of(rpc(url, key, "GetTask", {"id": opaque}))["id"] == task["id"]
    listed = task_of(rpc(url, key, "ListTasks", {"contextId": task["contextId"]}))
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    # a reply naming the bound id resolves the interrupt; the answer keeps the task's context
    reply = message(taskId=task["id"], parts=[{"data": {"action": "accept"}}])
    done = task_of(rpc(url, key, "SendMessage", {"message": reply}))
    assert done["id"] == task["id"] and done["contextId"] == task["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    # a streamed task: every frame's task id bound
    with httpx.stream(
        "POST",
        url,
        headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0", "Content-Type": "application/json"},
        content=orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message()}}
        ),
        timeout=30,
    ) as streamed:
        frames = [orjson.loads(line[5:])["result"] for line in streamed.iter_lines() if line.startswith("data:")]
    first = frames[0]["task"]["id"]
    assert first.startswith("default/run_")
    assert {f.get("statusUpdate", f.get("artifactUpdate", {})).get("taskId") for f in frames[1:]} == {first}


def test_an_unreadable_task_is_answered_exactly_like_an_unknown_one(
    host: Host, key: str, other_tenant_key: str
) -> None:
    url = interface(host)
    task = gated(url, key)
    tenant, _, opaque = task["id"].partition("/")
    fabricated = f"{tenant}/run_{uuid.uuid4().hex}"
    foreign = f"zz-conformance-foreign/{opaque}"
    unknown, bound_elsewhere = rpc(url, key, "GetTask", {"id": fabricated}), rpc(url, key, "GetTask", {"id": foreign})
    a, b = error_of(unknown), error_of(bound_elsewhere)
    assert a["code"] == b["code"] == -32001 and unknown.status_code == bound_elsewhere.status_code
    assert info(a)["reason"] == "TASK_NOT_FOUND"
    assert normalised(a, fabricated) == normalised(b, foreign)
    assert a["message"].replace(fabricated, "ID") == b["message"].replace(foreign, "ID"), "the same words"
    # the other tenant's caller: the real task is unknown to it, every operation alike, and never listed
    for method, params in (
        ("GetTask", {"id": task["id"]}),
        ("CancelTask", {"id": task["id"]}),
        ("SendMessage", {"message": message(taskId=task["id"], parts=[{"data": {"action": "accept"}}])}),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
    ):
        assert error_of(rpc(url, other_tenant_key, method, params))["code"] == -32001, method
    theirs = task_of(rpc(url, other_tenant_key, "ListTasks", {"contextId": task["contextId"]}))
    hinted = rpc(url, other_tenant_key, "ListTasks", {"tenant": tenant, "contextId": task["contextId"]}).json()
    assert theirs["tasks"] == [] and not hinted.get("result", {}).get("tasks")
    assert task_of(rpc(url, key, "GetTask", {"id": task["id"]}))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    canceled = task_of(rpc(url, key, "CancelTask", {"id": task["id"]}))
    assert canceled["id"] == task["id"] and canceled["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_CANCELED")


def test_errors_carry_one_error_info_and_nothing_there_is_the_openwop_envelope(host: Host, key: str) -> None:
    url = interface(host)
    task = gated(url, key)
    assert task_of(rpc(url, key, "CancelTask", {"id": task["id"]}))
    wait_until(
        lambda: task_of(rpc(url, key, "GetTask", {"id": task["id"]}))["status"]["state"] == "TASK_STATE_CANCELED",
        what="the task to be canceled",
    )
    again = error_of(rpc(url, key, "CancelTask", {"id": task["id"]}))
    assert again["code"] == -32002 and info(again)["reason"] == "TASK_NOT_CANCELABLE" and task["id"] in again["message"]
    late = error_of(rpc(url, key, "SendMessage", {"message": message(taskId=task["id"])}))
    assert late["code"] == -32004 and info(late)["reason"] == "UNSUPPORTED_OPERATION"
    for version in ("99.0", "0.3", None):  # 0.3 (no header at all, too) is below this interface's floor
        refused = error_of(rpc(url, key, "GetTask", {"id": task["id"]}, version=version))
        assert refused["code"] == -32009, version
        assert info(refused) == {
            "@type": INFO,
            "reason": "VERSION_NOT_SUPPORTED",
            "domain": "a2a-protocol.org",
            "metadata": {"requestedVersion": version or "0.3 (no A2A-Version)", "supportedVersions": "1.0"},
        }
    probes = {
        "no key": httpx.post(
            url, headers={"A2A-Version": "1.0"}, json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}
        ),
        "a wrong key": httpx.post(url, headers={"Authorization": "Bearer tk_nope_nope", "A2A-Version": "1.0"}, json={}),
        "not JSON": httpx.post(
            url, headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0"}, content=b'{"jsonrpc":"2.0",'
        ),
        "an unknown method": rpc(url, key, "openwop.conformance.NoSuchMethod", {}),
        "a GET": httpx.get(url),
    }
    for label, answer in probes.items():
        body = answer.json()
        assert body["jsonrpc"] == "2.0" and isinstance(body["error"], dict), (label, body)
        info(body["error"])
        assert "openwop-version" not in answer.headers, label
    assert probes["no key"].status_code == 401 and probes["no key"].headers["www-authenticate"] == "Bearer"
    assert info(probes["no key"].json()["error"])["reason"] == "UNAUTHENTICATED"
    assert probes["not JSON"].json()["error"]["code"] == -32700
    reader = made_key(host, "reader", "--scopes", "runs:read")
    forbidden = rpc(url, reader, "SendMessage", {"message": message()})
    assert forbidden.status_code == 403 and info(error_of(forbidden))["reason"] == "FORBIDDEN"
    assert probes["a GET"].status_code == 405 and probes["a GET"].headers["allow"] == "POST"
    # /v1/a2a is as it was: bare ids, 0.3 without a header
    legacy = httpx.post(
        f"{host.url}/v1/a2a",
        headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"].partition("/")[2]}},
    ).json()
    assert legacy["result"]["id"] == task["id"].partition("/")[2]


def test_a_push_registered_on_the_bound_interface_names_the_bound_task(
    start_host: Hosts[InProcessHost], receiver: Receiver
) -> None:
    """RFC 0214 at the v2 interface: the push body's task id is the one the caller registered it for (bound)."""
    host = start_host(*egress_to(receiver))
    key = host.dev_key
    assert key
    url = interface(host)
    task = gated(url, key)
    config = {
        "taskId": task["id"],
        "url": receiver.url("/v2"),
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    }
    made = task_of(rpc(url, key, "CreateTaskPushNotificationConfig", config))
    assert made["taskId"] == task["id"] and "credentials" not in json.dumps(made)
    listed = task_of(rpc(url, key, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}))
    assert [c["taskId"] for c in listed["configs"]] == [task["id"]]
    reply = message(taskId=task["id"], parts=[{"data": {"action": "accept"}}])
    assert task_of(rpc(url, key, "SendMessage", {"message": reply}))["status"]["state"] == "TASK_STATE_COMPLETED"
    wait_until(lambda: receiver.bodies("/v2"), what="the completed push")
    pushed = next(r for r in receiver.requests if r.path == "/v2")
    assert pushed.headers["content-type"] == "application/a2a+json" and pushed.headers["authorization"] == "Bearer c"
    assert "openwop-signature" not in pushed.headers
    assert json.loads(pushed.body)["statusUpdate"]["taskId"] == task["id"]


def test_a2a_sdk_1_3_with_defaults_speaks_1_0_to_the_bound_interface(host: Host, key: str) -> None:
    """a2a-sdk 1.3.0, unmodified, given the interface's URL as the agent's: it finds the card and picks /a2a."""
    with Sdk13() as sdk:
        connected = sdk.call("connect", url=f"{host.url}/a2a", key=key)
        assert {c["url"] for c in connected["chosen"]} == {f"{host.url}/a2a"}
        assert {c["transport"] for c in connected["chosen"]} == {"a2a.client.transports.jsonrpc.JsonRpcTransport"}
        [sent] = sdk.call("send", stream=False, text="publish", skill="approval-gated")["events"]
        task = sent["task"]
        assert task["id"].startswith("default/run_") and task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert sdk.call("get", id=task["id"])["id"] == task["id"]
        streamed = sdk.call("send", text="streamed")["events"]
        assert {e.get("statusUpdate", e.get("artifactUpdate", {})).get("taskId") for e in streamed[1:]} == {
            streamed[0]["task"]["id"]
        }
        assert streamed[0]["task"]["id"].startswith("default/run_")
        assert sdk.call("cancel", id=task["id"])["id"] == task["id"]
        with pytest.raises(SdkRefused) as unknown:
            sdk.call("get", id=f"elsewhere/{task['id'].partition('/')[2]}")
        assert unknown.value.kind == "TaskNotFoundError"
        assert sdk.checked >= 4, "every answer went through the SDK's strict 1.0 models"


def test_a2a_js_sdk_1_3_with_defaults_speaks_1_0_to_the_bound_interface(host: Host, key: str) -> None:
    """@a2a-js/sdk 1.3.0, default ClientFactory, given the interface's URL: 1.0 JSON-RPC at /a2a, ids bound.

    The JS resolver reads the card at ``new URL(".well-known/agent-card.json", base)``: relative to the base
    as URLs are, so the base is ``…/a2a/`` (without the slash it would be the origin's card, /v1/a2a's).
    """
    js13 = NodeProject(Path(__file__).resolve().parent / "js13")
    js13.install()
    for scenario in ("get", "cancel"):
        run = js13.run(
            "driver.mjs", scenario, json.dumps({}), env={"TETHER_URL": f"{host.url}/a2a/", "TETHER_KEY": key}
        )
        assert run.returncode == 0 and "result" in run.doc, run
        assert run.doc["client"]["endpoint"] == f"{host.url}/a2a" and run.doc["client"]["protocolVersion"] == "1.0"
        calls = [w for w in run.doc["wire"] if w["method"] == "POST"]
        assert calls and all(w["url"] == f"{host.url}/a2a" and w["a2aVersion"] == "1.0" for w in calls)
        result = run.doc["result"]
        if scenario == "get":
            assert result["sent"]["id"].startswith("default/run_") and result["full"]["id"] == result["sent"]["id"]
            assert result["missing"]["code"] == -32001
        else:
            assert result["canceled"]["id"].startswith("default/run_")
            assert result["again"]["code"] == -32002


def test_one_skill_alone_is_what_a_message_without_a_selector_runs(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """``--a2a-skill``: the card routes exactly the named workflow (the v2 scenarios need one skill, no selector)."""
    host = suite_host(request, "--a2a-skill", "approval-gated", "--default-skill", "approval-gated")
    key = host.dev_key
    assert key
    card = httpx.get(record(host)["agentCardUrl"], headers={"A2A-Version": "1.0"}).json()
    assert [s["id"] for s in card["skills"]] == ["approval-gated"]
    url = interface(host)
    task = task_of(rpc(url, key, "SendMessage", {"message": message("no skill named")}))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", "the one skill ran"
    # exactly the scenario's reply: a data part and the openwop interrupt metadata, the task by its bound id
    accept = {"action": "accept"}
    reply = message(taskId=task["id"], parts=[{"data": accept}], metadata={"openwop": {"interrupt": accept}})
    assert task_of(rpc(url, key, "SendMessage", {"message": reply}))["status"]["state"] == "TASK_STATE_COMPLETED"
    other = error_of(rpc(url, key, "SendMessage", {"message": message(metadata={"skillId": "echo"})}))
    assert other["code"] == -32602 and "approval-gated" in other["message"], "a workflow not named is no skill"
