"""The official client of the current generation, a2a-sdk 1.3.0, drives Tether over A2A 1.0.

The SDK runs unmodified, with default settings, in an environment of its own
(``sdk13/driver.py``; the main environment pins a2a-sdk 0.3.26 for the 0.3 suite). It
resolves the card, picks a transport by itself, and must pick JSON-RPC 1.0. Every answer
the host sends it (the card, each JSON-RPC body, each SSE event) also goes through the
outside oracle, a2a-sdk 1.3.0's protobuf models parsing strictly: a call whose answer
holds a field outside the 1.0 proto fails even though the SDK's lenient parser accepts it.
"""

from __future__ import annotations

import base64
import hashlib
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from a2a_wire import WORKFLOWS, run_events
from backends import Hosts
from harness import Host, HostProcess
from inproc import InProcessHost
from receiver import Receiver, egress_to
from sdk13_driver import Sdk13, SdkRefused

JSONRPC_1_0 = "a2a.client.transports.jsonrpc.JsonRpcTransport"
ACCEPT = {"action": "accept"}
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"


@pytest.fixture(scope="module")
def driver() -> Iterator[Sdk13]:
    """One a2a-sdk 1.3.0 process for the module (each test connects it to its host)."""
    with Sdk13() as sdk:
        yield sdk


@pytest.fixture
def sdk(driver: Sdk13, host: Host, key: str) -> Sdk13:
    """The driver, connected to this test's host with the SDK's defaults."""
    connect(driver, host, key)
    return driver


def connect(driver: Sdk13, host: Host, key: str, name: str = "main") -> dict[str, Any]:
    found: dict[str, Any] = driver.call("connect", url=host.url, key=key, **{"as": name})
    return found


def only_task(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The Task of a unary SendMessage (the SDK hands it back as one StreamResponse)."""
    assert len(events) == 1 and set(events[0]) == {"task"}, events
    task: dict[str, Any] = events[0]["task"]
    return task


def state(task: dict[str, Any]) -> str:
    value: str = task["status"]["state"]
    return value


def states(events: list[dict[str, Any]]) -> list[str]:
    """The state each task or status event shows, in order (artifact events show none)."""
    shown = []
    for event in events:
        if "task" in event:
            shown.append(state(event["task"]))
        elif "statusUpdate" in event:
            shown.append(event["statusUpdate"]["status"]["state"])
    return shown


def send(sdk: Sdk13, *, stream: bool = False, **args: Any) -> dict[str, Any]:
    """A unary SendMessage's Task (``stream=True``: the last state of a streamed one)."""
    events = sdk.call("send", stream=stream, **args)["events"]
    return only_task(events) if not stream else events[-1]


def test_default_client_resolves_the_card_and_picks_jsonrpc_1_0(driver: Sdk13, host: Host, key: str) -> None:
    connected = connect(driver, host, key)
    rpc_url = f"{host.url}/v1/a2a"
    assert connected["chosen"] == [
        {"transport": JSONRPC_1_0, "url": rpc_url},
        {"transport": JSONRPC_1_0, "url": rpc_url},
    ], "the 1.0 JSON-RPC transport, not CompatJsonRpcTransport (0.3)"
    assert connected["versionHeader"] == "1.0"
    card = connected["card"]
    assert card["name"] == "Tether"
    assert card["supportedInterfaces"][0] == {"url": rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    assert card["capabilities"]["streaming"] is True and card["capabilities"]["extendedAgentCard"] is True
    assert "bearer" in card["securitySchemes"]
    extended = driver.call("extended_card")
    assert extended["name"] == "Tether" and extended["supportedInterfaces"] == card["supportedInterfaces"]
    exchanges = driver.call("exchanges")["exchanges"]
    assert [e["method"] for e in exchanges] == ["GET", "GET", "GetExtendedAgentCard"]
    assert driver.checked >= 3, "the card (twice) and the extended card went through the oracle"


def test_blocking_send_completes_or_stops_at_the_approval_gate(sdk: Sdk13) -> None:
    done = send(sdk, text="hello")
    assert state(done) == COMPLETED
    assert done["artifacts"][0]["parts"][0] == {"text": "hello"}
    assert done["history"][0]["role"] == "ROLE_USER" and done["history"][0]["parts"] == [{"text": "hello"}]
    waiting = send(sdk, text="publish", skill="approval-gated")
    assert state(waiting) == INPUT_REQUIRED
    assert waiting["status"]["message"]["role"] == "ROLE_AGENT"
    methods = [e["method"] for e in sdk.call("exchanges")["exchanges"]]
    assert methods[-2:] == ["SendMessage", "SendMessage"]


def test_non_blocking_send_returns_a_task_still_running(sdk: Sdk13) -> None:
    queued = send(sdk, skill="slow", return_immediately=True)
    assert state(queued) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert state(sdk.call("get", id=queued["id"])) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    sdk.call("cancel", id=queued["id"])  # nothing left running


def test_stream_to_completion_and_to_the_gate(sdk: Sdk13) -> None:
    events = sdk.call("send", text="streamed")["events"]
    assert "task" in events[0], "a task stream starts with the Task"
    assert any("artifactUpdate" in e for e in events)
    assert states(events)[-1] == COMPLETED
    assert {e.get("statusUpdate", e.get("artifactUpdate", {})).get("taskId") for e in events[1:]} == {
        events[0]["task"]["id"]
    }
    gated = sdk.call("send", text="draft", skill="approval-gated")["events"]
    assert states(gated)[-1] == INPUT_REQUIRED, "the stream ends where the task waits for input"
    assert [e["method"] for e in sdk.call("exchanges")["exchanges"]][-2:] == ["SendStreamingMessage"] * 2


def test_get_with_history_and_unknown_ids(sdk: Sdk13) -> None:
    done = send(sdk, text="kept")
    got = sdk.call("get", id=done["id"], history_length=1)
    assert got["id"] == done["id"] and state(got) == COMPLETED and len(got["history"]) == 1
    assert "history" not in sdk.call("get", id=done["id"], history_length=0)
    with pytest.raises(SdkRefused) as unknown:
        sdk.call("get", id="run_nope")
    assert unknown.value.kind == "TaskNotFoundError"


def test_list_tasks_pages_filters_and_stays_in_the_tenant(
    driver: Sdk13, host: Host, key: str, other_tenant_key: str
) -> None:
    connect(driver, host, key)
    context = f"ctx-sdk13-{uuid.uuid4()}"
    made = [send(driver, text=f"n{i}", context_id=context)["id"] for i in range(3)]
    gated = send(driver, text="gate", skill="approval-gated", context_id=context)["id"]
    first = driver.call("list", context_id=context, page_size=2)
    assert len(first["tasks"]) == 2 and first["totalSize"] == 4 and first["pageSize"] == 2
    assert first["nextPageToken"]
    second = driver.call("list", context_id=context, page_size=2, page_token=first["nextPageToken"])
    assert len(second["tasks"]) == 2 and not second.get("nextPageToken")
    listed = [t["id"] for t in first["tasks"] + second["tasks"]]
    assert sorted(listed) == sorted([*made, gated]) and len(set(listed)) == 4
    assert all(t["contextId"] == context and "artifacts" not in t for t in first["tasks"] + second["tasks"])
    waiting = driver.call("list", context_id=context, status=INPUT_REQUIRED)
    assert [t["id"] for t in waiting["tasks"]] == [gated] and waiting["totalSize"] == 1
    with_artifacts = driver.call("list", context_id=context, status=COMPLETED, include_artifacts=True)
    assert {t["id"] for t in with_artifacts["tasks"]} == set(made)
    assert all(t["artifacts"] for t in with_artifacts["tasks"])

    connect(driver, host, other_tenant_key, name="other")
    theirs = driver.call("list", **{"as": "other"})
    assert not {t["id"] for t in theirs.get("tasks", [])} & {*made, gated}, "another tenant's tasks are never listed"
    assert driver.call("list", context_id=context, **{"as": "other"}).get("tasks", []) == []
    with pytest.raises(SdkRefused) as foreign:
        driver.call("get", id=gated, **{"as": "other"})
    assert foreign.value.kind == "TaskNotFoundError"
    with pytest.raises(SdkRefused) as foreign_cancel:
        driver.call("cancel", id=gated, **{"as": "other"})
    assert foreign_cancel.value.kind == "TaskNotFoundError"
    assert state(driver.call("get", id=gated)) == INPUT_REQUIRED, "the other tenant changed nothing"


def test_cancel(sdk: Sdk13) -> None:
    waiting = send(sdk, text="draft", skill="approval-gated")
    cancelled = sdk.call("cancel", id=waiting["id"])
    assert cancelled["id"] == waiting["id"] and state(cancelled) == "TASK_STATE_CANCELED"
    with pytest.raises(SdkRefused) as again:
        sdk.call("cancel", id=waiting["id"])
    assert again.value.kind == "TaskNotCancelableError"
    with pytest.raises(SdkRefused) as unknown:
        sdk.call("cancel", id="run_nope")
    assert unknown.value.kind == "TaskNotFoundError"


def test_subscribe_watches_an_approval_to_completion(sdk: Sdk13) -> None:
    waiting = send(sdk, text="draft", skill="approval-gated")
    watched = sdk.call("subscribe", id=waiting["id"], reply={"when": INPUT_REQUIRED, "data": ACCEPT})
    events = watched["events"]
    assert set(events[0]) == {"task"} and events[0]["task"]["id"] == waiting["id"], "the current Task first"
    assert states(events)[0] == INPUT_REQUIRED and states(events)[-1] == COMPLETED
    assert watched["reply"] and watched["reply"][0]["task"]["id"] == waiting["id"]
    assert state(sdk.call("get", id=waiting["id"])) == COMPLETED
    with pytest.raises(SdkRefused) as ended:
        sdk.call("subscribe", id=waiting["id"])
    assert ended.value.kind == "UnsupportedOperationError", "a task that ended has nothing to subscribe to"


def test_reply_to_an_approval_resumes_the_task(sdk: Sdk13) -> None:
    waiting = send(sdk, text="draft", skill="approval-gated")
    done = send(sdk, data=ACCEPT, task_id=waiting["id"])
    assert done["id"] == waiting["id"] and done["contextId"] == waiting["contextId"] and state(done) == COMPLETED
    with pytest.raises(SdkRefused) as ended:
        send(sdk, data=ACCEPT, task_id=waiting["id"])
    assert ended.value.kind == "UnsupportedOperationError", "a message to a task that ended is refused"


def test_push_config_create_get_list_delete(
    driver: Sdk13, start_host: Hosts[InProcessHost], receiver: Receiver
) -> None:
    host = start_host(
        "--workflows",
        str(WORKFLOWS),
        *egress_to(receiver),
    )
    assert host.dev_key
    connect(driver, host, host.dev_key)
    task = send(driver, text="draft", skill="approval-gated")
    secret = f"cred-{uuid.uuid4()}"
    named = driver.call(
        "push_create",
        task_id=task["id"],
        id="first",
        url=receiver.url("/a"),
        token="tok",
        scheme="Bearer",
        credentials=secret,
    )
    assert named == {
        "id": "first",
        "taskId": task["id"],
        "url": receiver.url("/a"),
        "authentication": {"scheme": "Bearer"},
    }
    minted = driver.call("push_create", task_id=task["id"], url=receiver.url("/b"))
    assert minted["id"] and minted["id"] != "first" and minted["taskId"] == task["id"]
    assert driver.call("push_get", task_id=task["id"], id="first") == named
    listed = driver.call("push_list", task_id=task["id"])
    assert sorted(c["id"] for c in listed["configs"]) == sorted(["first", minted["id"]])
    assert secret not in str(listed) and "tok" not in str([c.get("token") for c in listed["configs"]])
    assert driver.call("push_delete", task_id=task["id"], id=minted["id"]) == {}
    assert driver.call("push_delete", task_id=task["id"], id=minted["id"]) == {}, "deleting twice is no error"
    assert [c["id"] for c in driver.call("push_list", task_id=task["id"])["configs"]] == ["first"]
    with pytest.raises(SdkRefused) as gone:
        driver.call("push_get", task_id=task["id"], id=minted["id"])
    assert gone.value.kind == "TaskNotFoundError"
    with pytest.raises(SdkRefused) as unknown:
        driver.call("push_list", task_id="run_nope")
    assert unknown.value.kind == "TaskNotFoundError"


@pytest.mark.process  # SIGKILL
def test_hand_off_survives_a_restart_then_is_approved(driver: Sdk13, host: HostProcess, key: str) -> None:
    """The issue's "done when": hand a task over 1.0, walk away, the host dies and comes back,
    the caller finds the task waiting, watches it and approves it, and it completes once."""
    connect(driver, host, key)
    handed = driver.call("send", text="publish the Q3 report", skill="approval-gated")["events"]
    assert states(handed)[-1] == INPUT_REQUIRED
    task_id = handed[0]["task"]["id"]
    driver.call("disconnect")

    host.restart()  # SIGKILL, then the same data directory
    connect(driver, host, key)
    waiting = driver.call("list", status=INPUT_REQUIRED)
    assert task_id in [t["id"] for t in waiting["tasks"]]
    found = driver.call("get", id=task_id)
    assert state(found) == INPUT_REQUIRED and found["contextId"] == handed[0]["task"]["contextId"]
    watched = driver.call("subscribe", id=task_id, reply={"when": INPUT_REQUIRED, "data": ACCEPT})
    assert states(watched["events"])[0] == INPUT_REQUIRED and states(watched["events"])[-1] == COMPLETED
    assert state(driver.call("get", id=task_id)) == COMPLETED
    started = [e for e in run_events(host.http(key), task_id) if e["type"] == "run.started"]
    assert len(started) == 1, started


def _file_parts(data: bytes) -> list[dict[str, Any]]:
    """About 1 MiB of bytes and a file by URI, as ProtoJSON writes them (what echo must answer with)."""
    return [
        {"raw": base64.b64encode(data).decode(), "filename": "q3.bin", "mediaType": "application/x-q3"},
        {"url": "https://files.example.com/q3/signed.pdf", "filename": "signed.pdf", "mediaType": "application/pdf"},
    ]


def _echoed(task: dict[str, Any], data: bytes) -> None:
    """The task's artifact is the message as sent: text, the bytes (sha256 compared), the URL."""
    assert state(task) == COMPLETED, task["status"]
    text, sent, linked = task["artifacts"][0]["parts"]
    raw = sent.pop("raw")
    assert text == {"text": "the Q3 report"}
    assert hashlib.sha256(base64.b64decode(raw)).hexdigest() == hashlib.sha256(data).hexdigest()
    assert sent == {"filename": "q3.bin", "mediaType": "application/x-q3"}
    assert linked == _file_parts(data)[1]


@pytest.mark.process  # SIGKILL
def test_a_file_round_trips_through_echo_from_get_the_stream_and_a_restart(
    driver: Sdk13, host: HostProcess, key: str
) -> None:
    data = random.Random(13).randbytes(1024 * 1024 + 5)
    connect(driver, host, key)
    sent = send(driver, text="the Q3 report", files=_file_parts(data))
    _echoed(sent, data)
    _echoed(driver.call("get", id=sent["id"]), data)
    streamed = driver.call("send", text="the Q3 report", files=_file_parts(data))["events"]  # the SDK's default
    [update] = [e["artifactUpdate"] for e in streamed if "artifactUpdate" in e]
    _echoed({"status": {"state": COMPLETED}, "artifacts": [update["artifact"]]}, data)
    streamed_id = streamed[0]["task"]["id"]
    driver.call("disconnect")
    host.restart()  # SIGKILL, then the same store
    connect(driver, host, key)
    for task_id in (sent["id"], streamed_id):
        _echoed(driver.call("get", id=task_id), data)
