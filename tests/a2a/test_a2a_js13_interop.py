"""The official JavaScript client, @a2a-js/sdk 1.3.0 with default settings, drives Tether over A2A 1.0.

``js13/driver.mjs`` builds the client a new user builds (``ClientFactoryOptions.default``, no
``legacyCompat``; only a credentials interceptor added), runs one named scenario and prints
what the SDK returned beside the raw wire it sent and read. Each test checks both: the
SDK's own reading (it chose the 1.0 JSON-RPC transport, parsed every answer) and the
ProtoJSON shapes on the wire (a2a-v1.0-wire §3), since the SDK's parsers tolerate much.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a_wire import WORKFLOWS, run_events, wait_state
from backends import suite_host
from harness import Host, HostProcess
from node_client import NodeProject

JS13 = NodeProject(Path(__file__).resolve().parent / "js13")
#: a push URL the host's egress guard accepts (127.0.0.1 is allowed on this host); nothing is delivered to it
PUSH_URL = "https://127.0.0.1:9/push"
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_RPC = "/v1/a2a"


@pytest.fixture(scope="module")
def node() -> NodeProject:
    JS13.install()
    return JS13


@pytest.fixture
def host(request: pytest.FixtureRequest, backend: str) -> Host:
    """The A2A test host, allowed to accept push URLs on 127.0.0.1 (for push config CRUD)."""
    return suite_host(
        request, "--workflows", str(WORKFLOWS), "--enable-test-seams", "--egress-allow-cidr", "127.0.0.1/32"
    )


def drive(node: NodeProject, host: Host, key: str, scenario: str, **args: Any) -> dict[str, Any]:
    """Run a driver scenario; the SDK chose the 1.0 JSON-RPC transport and spoke only 1.0 on the wire."""
    run = node.run(
        "driver.mjs", scenario, json.dumps(args), env={"TETHER_URL": host.url, "TETHER_KEY": key}, timeout=90
    )
    assert run.returncode == 0 and "result" in run.doc, run
    doc = run.doc
    assert doc["client"] == {
        "protocolName": "JSONRPC",
        "protocolVersion": "1.0",
        "transport": "JsonRpcTransport",
        "endpoint": f"{host.url}{_RPC}",
    }, "not the 1.0 JSON-RPC transport (the 0.3 legacy one, or 'No compatible transport found')"
    card_fetch, *calls = doc["wire"]
    assert card_fetch["url"] == f"{host.url}/.well-known/agent-card.json" and card_fetch["status"] == 200
    for call in calls:
        assert call["url"] == f"{host.url}{_RPC}" and call["method"] == "POST", call
        assert call["a2aVersion"] == "1.0" and call["answeredVersion"] == "1.0", call
        assert re.fullmatch(r"[A-Z][A-Za-z]+", call["request"]["method"]), call["request"]
        for answer in _answers(call):
            assert answer["jsonrpc"] == "2.0" and answer["id"] == call["request"]["id"], answer
            assert set(answer) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), answer
            _check_proto_json(answer.get("result"))
            if "error" in answer:
                _check_error(answer["error"])
    return doc


def _answers(call: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON-RPC answers of a call: its body, or each event of its stream."""
    response = call["response"]
    if response is None:  # a stream the client left
        return []
    return response if isinstance(response, list) else [response]


def _check_error(error: dict[str, Any]) -> None:
    """A 1.0 JSON-RPC error: code, message and typed details with a google.rpc.ErrorInfo."""
    assert set(error) <= {"code", "message", "data"} and isinstance(error["code"], int), error
    infos = [d for d in error.get("data", []) if d.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert len(infos) == 1 and re.fullmatch(r"[A-Z_]+", infos[0]["reason"]), error


def _check_proto_json(value: Any, path: str = "result") -> None:
    """ProtoJSON, not 0.3 JSON: no ``kind`` or ``final``, enum names, ms UTC timestamps (free-form data skipped)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_proto_json(item, f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        return
    assert "kind" not in value and "final" not in value, f"{path} has 0.3 fields: {sorted(value)}"
    for name, item in value.items():
        here = f"{path}.{name}"
        if name in ("metadata", "data"):  # Struct / Value: any JSON
            continue
        if name == "state":
            assert isinstance(item, str) and item.startswith("TASK_STATE_"), f"{here} = {item!r}"
        elif name == "role":
            assert item in ("ROLE_USER", "ROLE_AGENT"), f"{here} = {item!r}"
        elif name == "timestamp":
            assert _TIMESTAMP.match(item), f"{here} = {item!r}"
        elif name in ("history", "artifacts", "parts"):
            assert item != [], f"{here} is an empty list: ProtoJSON leaves defaults out"
        _check_proto_json(item, here)


def _calls(doc: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return [c for c in doc["wire"][1:] if c["request"]["method"] == method]


def _state(task: dict[str, Any]) -> str:
    state: str = task["status"]["state"]
    return state


def _one_run_started(host: Host, key: str, task_id: str) -> None:
    started = [e for e in run_events(host.http(key), task_id) if e["type"] == "run.started"]
    assert len(started) == 1, started


def test_default_client_picks_json_rpc_1_0_from_the_card(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "card")
    card = doc["result"]["card"]
    first = card["supportedInterfaces"][0]
    assert {k: first[k] for k in ("url", "protocolBinding", "protocolVersion")} == {
        "url": f"{host.url}{_RPC}",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert not first.get("tenant"), "no tenant: the caller's key decides it"
    assert doc["wire"][0]["a2aVersion"] == "1.0", "the SDK announces 1.0 on the card fetch"
    (extended,) = _calls(doc, "GetExtendedAgentCard")
    assert extended["response"]["result"]["name"] == "Tether"
    assert doc["result"]["extended"]["name"] == "Tether"


def test_send_blocking_and_not(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "send")
    echo, gated, queued = (doc["result"][k] for k in ("echo", "gated", "queued"))
    assert _state(echo) == "TASK_STATE_COMPLETED"
    assert echo["artifacts"][0]["parts"][0] == {"text": "hello from js"}
    assert _state(gated) == "TASK_STATE_INPUT_REQUIRED"
    question = gated["status"]["message"]
    assert question["role"] == "ROLE_AGENT" and question["taskId"] == gated["id"]
    assert question["parts"][1]["data"]["interrupt"]["kind"] == "approval"
    assert _state(queued) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), "returnImmediately: not terminal"
    sends = _calls(doc, "SendMessage")
    assert [c["request"]["params"].get("configuration", {}).get("returnImmediately") for c in sends] == [
        None,
        None,
        True,
    ]
    for call in sends:
        assert set(call["response"]["result"]) == {"task"}, "a send answers {task}"
        assert call["response"]["result"]["task"]["history"][0]["role"] == "ROLE_USER"


def test_reply_to_an_approval(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "reply")
    gated, answered, after_end = (doc["result"][k] for k in ("gated", "answered", "afterEnd"))
    assert _state(gated) == "TASK_STATE_INPUT_REQUIRED"
    assert answered["id"] == gated["id"] and answered["contextId"] == gated["contextId"]
    assert _state(answered) == "TASK_STATE_COMPLETED"
    reply = _calls(doc, "SendMessage")[1]["request"]["params"]["message"]
    assert reply["taskId"] == gated["id"] and reply["parts"] == [{"data": {"action": "accept"}}]
    assert (after_end["name"], after_end["code"]) == ("UnsupportedOperationError", -32004)
    _one_run_started(host, key, gated["id"])


def test_stream_ends_at_terminal_and_at_input_required(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "stream")
    echo, gated = doc["result"]["echo"], doc["result"]["gated"]
    assert echo[0]["case"] == "task" and echo[0]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert "artifactUpdate" in [e["case"] for e in echo]
    assert (echo[-1]["case"], echo[-1]["state"]) == ("statusUpdate", "TASK_STATE_COMPLETED")
    assert gated[0]["case"] == "task"
    assert gated[-1]["state"] == "TASK_STATE_INPUT_REQUIRED", "the stream ends at the gate"
    for call, events in zip(_calls(doc, "SendStreamingMessage"), (echo, gated), strict=True):
        assert call["contentType"].startswith("text/event-stream")
        frames = [f["result"] for f in call["response"]]
        assert [next(iter(f)) for f in frames] == [e["case"] for e in events], "one StreamResponse member per event"


def test_get_task_with_history_lengths(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "get")
    sent, full, one, none, missing = (doc["result"][k] for k in ("sent", "full", "one", "none", "missing"))
    assert full["id"] == sent["id"] and _state(full) == "TASK_STATE_COMPLETED"
    assert full["artifacts"] == sent["artifacts"] and full["history"] == sent["history"]
    assert len(one["history"]) == 1
    got = [c["response"].get("result") for c in _calls(doc, "GetTask")]
    assert "history" not in got[2], "historyLength 0: no history key on the wire"
    assert (missing["name"], missing["code"]) == ("TaskNotFoundError", -32001)


def test_list_tasks_pages_and_filters(node: NodeProject, host: Host, key: str) -> None:
    context = f"ctx-js13-{uuid.uuid4().hex}"
    doc = drive(node, host, key, "list", contextId=context)
    made = {t["id"]: t for t in doc["result"]["made"]}
    assert len(made) == 5 and {t["contextId"] for t in made.values()} == {context}
    pages = [c["response"]["result"] for c in _calls(doc, "ListTasks")]
    paged, rest = pages[:3], pages[3:]
    assert [len(p["tasks"]) for p in paged] == [2, 2, 1]
    assert [p["nextPageToken"] == "" for p in paged] == [False, False, True], "nextPageToken always present"
    assert {(p["pageSize"], p["totalSize"]) for p in paged} == {(2, 5)}
    listed = [t for p in paged for t in p["tasks"]]
    assert sorted(t["id"] for t in listed) == sorted(made), "every task once, none twice"
    stamps = [t["status"]["timestamp"] for t in listed]
    assert stamps == sorted(stamps, reverse=True), "newest status first"
    assert all("artifacts" not in t for t in listed), "includeArtifacts unset: no artifacts key"
    (gated_page,) = rest[:1]
    assert gated_page["totalSize"] == 2 and gated_page["nextPageToken"] == ""
    assert {t["id"] for t in gated_page["tasks"]} == {
        i for i, t in made.items() if _state(t) == "TASK_STATE_INPUT_REQUIRED"
    }
    assert all(_state(t) == "TASK_STATE_INPUT_REQUIRED" for t in gated_page["tasks"])
    everything = {t["id"] for p in rest[1:] for t in p["tasks"]}
    assert set(made) <= everything


def test_another_tenants_tasks_are_never_listed_or_read(
    node: NodeProject, host: Host, key: str, other_tenant_key: str
) -> None:
    context = f"ctx-js13-{uuid.uuid4().hex}"
    mine = drive(node, host, key, "handoff", contextId=context)["result"]["task"]
    theirs = drive(node, host, other_tenant_key, "handoff", contextId=context)["result"]["task"]
    assert theirs["contextId"] == mine["contextId"] == context, "the same contextId, in two tenants"
    doc = drive(node, host, key, "foreign", taskId=theirs["id"], contextId=context)
    result = doc["result"]
    assert [t["id"] for p in result["listed"] for t in p["tasks"]] == [mine["id"]]
    for name in ("get", "cancel", "subscribe", "unknown"):
        assert result[name]["code"] == -32001, (name, result[name])
    foreign_get, unknown_get = (c["response"] for c in _calls(doc, "GetTask"))
    assert _without(foreign_get, theirs["id"]) == _without(unknown_get, "run_no_such_task"), (
        "a foreign task id is answered exactly as an unknown one"
    )
    seen_by_them = drive(node, host, other_tenant_key, "foreign", taskId=mine["id"], contextId=context)["result"]
    assert [t["id"] for p in seen_by_them["listed"] for t in p["tasks"]] == [theirs["id"]]
    assert seen_by_them["get"]["code"] == -32001


def _without(answer: dict[str, Any], task_id: str) -> str:
    return json.dumps({**answer, "id": None}, sort_keys=True).replace(task_id, "<id>")


def test_cancel(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "cancel")
    result = doc["result"]
    assert _state(result["canceledAtGate"]) == "TASK_STATE_CANCELED"
    assert _state(result["canceled"]) in ("TASK_STATE_WORKING", "TASK_STATE_CANCELED"), "cancelling, or canceled"
    assert result["canceled"]["id"] == result["queued"]["id"]
    assert _state(result["read"]) == "TASK_STATE_CANCELED"
    assert (result["again"]["name"], result["again"]["code"]) == ("TaskNotCancelableError", -32002)


def test_subscribe_at_a_gate_sees_the_approval_complete(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "subscribe")
    result = doc["result"]
    task_id = result["gated"]["id"]
    events = result["events"]
    assert (events[0]["case"], events[0]["state"]) == ("task", "TASK_STATE_INPUT_REQUIRED"), "the current Task first"
    assert (events[-1]["case"], events[-1]["state"]) == ("statusUpdate", "TASK_STATE_COMPLETED")
    assert all(e["json"][e["case"]].get("taskId", e["json"][e["case"]].get("id")) == task_id for e in events)
    assert len(result["approvals"]) == 1, "approved over another call, while subscribed"
    assert (result["ended"]["name"], result["ended"]["code"]) == ("UnsupportedOperationError", -32004)
    assert _state(result["final"]) == "TASK_STATE_COMPLETED"
    (subscribe, _ended) = _calls(doc, "SubscribeToTask")
    assert subscribe["contentType"].startswith("text/event-stream")
    assert [set(f["result"]) for f in subscribe["response"]][0] == {"task"}
    _one_run_started(host, key, task_id)


def test_push_config_create_get_list_delete(node: NodeProject, host: Host, key: str) -> None:
    doc = drive(node, host, key, "push", url=PUSH_URL)
    result = doc["result"]
    task_id = result["task"]["id"]
    created = result["created"]
    assert created == {"id": "js13-a", "taskId": task_id, "url": PUSH_URL, "authentication": {"scheme": "Bearer"}}
    assert result["second"]["id"].startswith("pnc_") and result["second"]["taskId"] == task_id
    assert result["got"] == created
    assert sorted(c["id"] for c in result["listed"]) == sorted(["js13-a", result["second"]["id"]])
    assert result["afterDelete"] == [result["second"]], "deleted, and deleting again is no error"
    assert (result["gone"]["name"], result["gone"]["code"]) == ("TaskNotFoundError", -32001)
    assert [c["response"].get("result") for c in _calls(doc, "DeleteTaskPushNotificationConfig")] == [{}, {}]
    for call in doc["wire"][1:]:
        answer = str(call["response"])
        assert "js13-token" not in answer and "js13-secret" not in answer, "a read never returns secrets"


@pytest.mark.process  # SIGKILL
@pytest.mark.parametrize("left", ["after-a-blocking-send", "mid-stream"])
def test_handoff_survives_disconnect_and_restart(node: NodeProject, host: HostProcess, key: str, left: str) -> None:
    """Done when: hand over, disconnect, restart, find it with ListTasks and GetTask, subscribe, approve, complete.

    The client leaves once a blocking send returns at the gate, or in the middle of a
    stream while the task still works (the host carries it to the gate on its own).
    """
    if left == "mid-stream":
        first = drive(node, host, key, "leave")["result"]["first"]
        assert set(first) == {"task"} and _state(first["task"]) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        handed = wait_state(host.http(key), first["task"]["id"], "input-required")
    else:
        handed = drive(node, host, key, "handoff")["result"]["task"]
        assert _state(handed) == "TASK_STATE_INPUT_REQUIRED"
    host.kill()
    host.start()
    doc = drive(node, host, key, "resume", taskId=handed["id"])
    result = doc["result"]
    found = [t for p in result["found"] for t in p["tasks"]]
    assert [t["id"] for t in found] == [handed["id"]] and _state(found[0]) == "TASK_STATE_INPUT_REQUIRED"
    got = result["got"]
    assert _state(got) == "TASK_STATE_INPUT_REQUIRED"
    assert got["contextId"] == handed["contextId"]
    assert [m["messageId"] for m in got["history"]] == [m["messageId"] for m in handed["history"]]
    events = result["events"]
    assert (events[0]["case"], events[0]["state"]) == ("task", "TASK_STATE_INPUT_REQUIRED")
    assert (events[-1]["case"], events[-1]["state"]) == ("statusUpdate", "TASK_STATE_COMPLETED")
    assert _state(result["final"]) == "TASK_STATE_COMPLETED"
    _one_run_started(host, key, handed["id"])


def _echoed_as_read(parts: list[dict[str, Any]], sha256: str) -> None:
    """What the SDK read of echo's artifact: the text, the file's bytes (by sha256), the URL."""
    assert parts == [
        {"text": "the Q3 report"},
        {"raw": sha256, "filename": "q3.bin", "mediaType": "application/x-q3"},
        {"url": "https://files.example.com/q3/signed.pdf", "filename": "signed.pdf", "mediaType": "application/pdf"},
    ], parts


@pytest.mark.process  # SIGKILL
def test_a_file_round_trips_through_echo_from_get_the_stream_and_a_restart(
    node: NodeProject, host: HostProcess, key: str
) -> None:
    doc = drive(node, host, key, "files", size=1024 * 1024 + 7)
    result = doc["result"]
    assert result["states"] == ["TASK_STATE_COMPLETED"] * 2
    for read in result["read"].values():
        _echoed_as_read(read, result["sha256"])
    (get,) = _calls(doc, "GetTask")
    raw = get["response"]["result"]["artifacts"][0]["parts"][1]["raw"]
    assert hashlib.sha256(base64.b64decode(raw)).hexdigest() == result["sha256"], "the wire itself, byte for byte"
    host.kill()
    host.start()
    again = drive(node, host, key, "filesAgain", taskIds=result["taskIds"])["result"]["read"]
    assert [r["state"] for r in again] == ["TASK_STATE_COMPLETED"] * 2
    for read in again:
        _echoed_as_read(read["parts"], result["sha256"])
