"""One run, either major: what one surface writes, the other reads, answers and controls.

One engine and one store serve v1 (under ``/v1``), v2 (the unversioned paths) and A2A: a
run is the same run whichever created it. Here a run read through v1 and through v2 shows
the same snapshot and the same events (sequences, event ids, types, times); an A2A 1.0
task is read, answered and cancelled over v2 REST; and, on PostgreSQL, a run created under
v1 on one host is read, answered and cancelled under v2 on another host of the same
database. Every v2 answer is held to the official v2 schemas, every A2A 1.0 one to a2a-sdk's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import Hosts
from harness import Host, wait_until
from inproc import InProcessHost
from schemas import openwop_validator
from v2_wire import project, refused
from workflow_docs import node, workflow_doc

_A2A = Path(__file__).resolve().parents[1] / "a2a"
if str(_A2A) not in sys.path:
    sys.path.insert(0, str(_A2A))

from a2a_wire10 import result10, user10  # noqa: E402

V2 = {"OpenWOP-Version": "2.0"}
#: an approval, then a wait long enough to cancel it in
GATE_THEN_WAIT = workflow_doc(
    "gate-then-wait",
    [
        node("gate", "core.approvalGate", config={"title": "Go on?", "actions": ["accept", "reject"]}),
        node("wait", "core.delay", config={"delayMs": 60000}),
    ],
    [{"id": "e1", "sourceNodeId": "gate", "targetNodeId": "wait"}],
)
#: the snapshot keys both majors carry, as they are
SHARED = ("workflowId", "status", "tags", "metadata", "startedAt", "completedAt", "currentNodeId", "variables")


def check_event(event: dict[str, Any]) -> None:
    openwop_validator("v2/run-event").validate(event)
    openwop_validator(f"v2/run-event-payloads#/_typeIndex/properties/{event['type']}").validate(event["payload"])


def v1_snapshot(v1: httpx.Client, run_id: str) -> dict[str, Any]:
    answer = v1.get(f"/v1/runs/{run_id}")
    assert answer.status_code == 200 and answer.headers["openwop-version"] == "1.0", answer.text
    body: dict[str, Any] = answer.json()
    return body


def v2_snapshot(v2: httpx.Client, bound: str) -> dict[str, Any]:
    answer = v2.get(f"/runs/{project(bound)}")
    assert answer.status_code == 200 and answer.headers["openwop-version"] == "2.0", answer.text
    body: dict[str, Any] = answer.json()
    openwop_validator("v2/run-snapshot").validate(body)
    return body


def v1_events(v1: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = v1.get(f"/v1/runs/{run_id}/events/poll", params={"timeout": 0}).json()["events"]
    return events


def v2_events(v2: httpx.Client, bound: str) -> list[dict[str, Any]]:
    page = v2.get(f"/runs/{project(bound)}/events/poll", params={"timeout": 0})
    assert page.status_code == 200, page.text
    events: list[dict[str, Any]] = page.json()["events"]
    for event in events:
        check_event(event)
        assert event["runId"] == bound
    return events


def stream_frames(client: httpx.Client, path: str) -> list[tuple[int, str]]:
    """``(id, event)`` of each frame of a finished run's debug stream, read until the host closes it."""
    frames: list[tuple[int, str]] = []
    with client.stream("GET", f"{path}?streamMode=debug", headers={"Accept": "text/event-stream"}) as response:
        assert response.status_code == 200, response.read()
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if not line:
                if "data" in fields:
                    frames.append((int(fields["id"]), fields["event"]))
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.strip()
    return frames


def assert_same_run(v1: httpx.Client, v2: httpx.Client, run_id: str, tenant: str = "default") -> dict[str, Any]:
    """The run as v1 and as v2 read it: the same snapshot fields, the same events (v2's bound, in v2's names)."""
    bound = f"{tenant}/{run_id}"
    one, two = v1_snapshot(v1, run_id), v2_snapshot(v2, bound)
    assert one["runId"] == run_id and two["runId"] == bound
    assert two["owner"]["tenant"] == one["owner"]["tenant"] == tenant
    for key in (*SHARED, "nodeStates", "inputs"):
        assert one.get(key) == two.get(key), (key, one.get(key), two.get(key))
    if "interrupt" in one:
        pending = two["extensions"]["tether.interrupt"]
        assert pending["interruptId"] == f"{tenant}/{one['interrupt']['interruptId']}"
        assert (pending["nodeId"], pending["key"]) == (one["interrupt"]["nodeId"], one["interrupt"]["key"])
    else:
        assert "extensions" not in two
    old, new = v1_events(v1, run_id), v2_events(v2, bound)
    assert [(e["sequence"], e["eventId"], e["type"], e["timestamp"], e.get("nodeId")) for e in old] == [
        (e["sequence"], e["eventId"], e["type"], e["timestamp"], e.get("nodeId")) for e in new
    ]
    assert {e["runId"] for e in old} == {run_id}
    return two


@pytest.fixture
def v1(host: Host, key: str) -> Iterator[httpx.Client]:
    with host.client(key) as client:
        yield client


@pytest.mark.parametrize("created_under", ["v1", "v2"])
def test_a_run_reads_alike_through_v1_and_v2_and_either_answers_it(
    v1: httpx.Client, http: httpx.Client, created_under: str
) -> None:
    """Created under one major, answered under the other: at the gate and at the end both read the same run."""
    body = {"workflowId": "approval-gated", "inputs": {"prompt": "both"}, "tags": ["x"], "metadata": {"m": 1}}
    if created_under == "v1":
        made = v1.post("/v1/runs", json=body)
        assert made.status_code == 201 and made.headers["openwop-version"] == "1.0", made.text
        run_id = made.json()["runId"]
    else:
        made = http.post("/runs", json=body)
        assert made.status_code == 201 and made.headers["openwop-version"] == "2.0", made.text
        run_id = made.json()["runId"].partition("/")[2]
    wait_until(lambda: v1_snapshot(v1, run_id)["status"] == "waiting-approval", what="the gate")
    assert_same_run(v1, http, run_id)

    if created_under == "v1":  # answered under the other major
        answer = http.post(
            f"/runs/{project('default/' + run_id)}/interrupts/gate", json={"resumeValue": {"action": "accept"}}
        )
    else:
        token = v1_snapshot(v1, run_id)["interrupt"]["interruptToken"]
        answer = v1.post(f"/v1/interrupts/{token}", json={"resumeValue": {"action": "accept"}})
    assert answer.status_code == 200, answer.text
    wait_until(lambda: v1_snapshot(v1, run_id)["status"] == "completed", what="the run to complete")
    two = assert_same_run(v1, http, run_id)
    assert two["completedAt"]
    assert stream_frames(v1, f"/v1/runs/{run_id}/events") == stream_frames(
        http, f"/runs/{project('default/' + run_id)}/events"
    )


def test_an_a2a_10_task_is_read_answered_and_cancelled_over_v2(http: httpx.Client, v1: httpx.Client) -> None:
    """A task sent as an A2A 1.0 ``SendMessage`` is a run: v2 reads it (and its pending interrupt) by the bound
    task id, answers that interrupt, and cancels another such task; A2A then reads both outcomes."""
    answered = result10(v1, "SendMessage", {"message": user10("draft", skill="approval-gated")})["task"]
    assert answered["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    bound = f"default/{answered['id']}"
    snapshot = v2_snapshot(http, bound)
    assert snapshot["status"] == "waiting-approval" and snapshot["runId"] == bound
    pending = snapshot["extensions"]["tether.interrupt"]
    assert pending["nodeId"] == "gate" and pending["interruptToken"].startswith("ow2.")
    events = v2_events(http, bound)
    assert events[0]["type"] == "run.started" and events[0]["payload"]["transport"] == "a2a"
    assert "node.suspended" in [e["type"] for e in events]
    resolved = http.post(f"/runs/{project(bound)}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
    assert resolved.status_code == 200 and resolved.json()["runId"] == bound, resolved.text
    done = wait_until(
        lambda: (
            (t := result10(v1, "GetTask", {"id": answered["id"]}))["status"]["state"] == "TASK_STATE_COMPLETED" and t
        ),
        what="the A2A task to complete",
    )
    assert done["id"] == answered["id"]
    assert v2_snapshot(http, bound)["status"] == "completed"
    assert_same_run(v1, http, answered["id"])

    cancelled = result10(v1, "SendMessage", {"message": user10("draft", skill="approval-gated")})["task"]
    other = f"default/{cancelled['id']}"
    answer = http.post(f"/runs/{project(other)}/cancel", json={"reason": "over v2"})
    assert answer.status_code == 200 and answer.json() == {"runId": other, "status": "cancelled"}, answer.text
    assert result10(v1, "GetTask", {"id": cancelled["id"]})["status"]["state"] == "TASK_STATE_CANCELED"
    assert v2_events(http, other)[-1]["type"] == "run.cancelled"
    refused(http.post(f"/runs/{project(other)}/cancel", json={}), 409, "run_terminal")
    # its interrupt went with it: answering it now is 410 interrupt_cancelled, as the v2 registry names it
    late = http.post(f"/runs/{project(other)}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
    refused(late, 410, "interrupt_cancelled")


@pytest.fixture
def workflows(tmp_path: Path) -> Path:
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "gate-then-wait.json").write_text(json.dumps(GATE_THEN_WAIT))
    return folder


@pytest.mark.parametrize("backend", ["postgres"])  # only PostgreSQL: SQLite is one host's store by design
def test_a_v1_run_on_one_host_is_read_answered_and_cancelled_under_v2_on_another(
    start_host: Hosts[InProcessHost], shared_database: str, workflows: Path, tmp_path: Path
) -> None:
    """Two hosts on one PostgreSQL database (sharing the host key, as operators must): a run created under v1 on A
    is read under v2 on B (bare and bound), its interrupt answered and the run cancelled there; A reads under v1
    what B did, and both majors read the same log."""
    args = ("--workflows", str(workflows), "--secret-key-file", str(tmp_path / "shared-host.key"))
    a = start_host(*args, name="a", database_url=shared_database)
    b = start_host(*args, name="b", database_url=shared_database)
    key = a.dev_key
    assert key and b.dev_key is None, "B shares A's keys"
    with a.client(key) as on_a, b.client(key) as on_b:
        on_b.headers.update(V2)
        made = on_a.post("/v1/runs", json={"workflowId": "gate-then-wait", "inputs": {}})
        assert made.status_code == 201 and made.headers["openwop-version"] == "1.0", made.text
        run_id = made.json()["runId"]
        bound = f"default/{run_id}"
        wait_until(lambda: v1_snapshot(on_a, run_id)["status"] == "waiting-approval", what="the gate")
        for form in (run_id, project(bound), bound.replace("/", "%2F")):
            read = on_b.get(f"/runs/{form}")
            assert read.status_code == 200 and read.json()["runId"] == bound, (form, read.text)
            assert read.json()["status"] == "waiting-approval"
        assert_same_run(on_a, on_b, run_id)

        answer = on_b.post(f"/runs/{project(bound)}/interrupts/gate", json={"resumeValue": {"action": "accept"}})
        assert answer.status_code == 200 and answer.json() == {"runId": bound, "nodeId": "gate", "status": "running"}
        wait_until(
            lambda: v2_snapshot(on_b, bound)["nodeStates"].get("wait", {}).get("status") == "running",
            what="the wait node to run",
        )
        cancel = on_b.post(f"/runs/{project(bound)}/cancel", json={"reason": "from B"})
        assert cancel.status_code == 200 and cancel.json()["runId"] == bound, cancel.text
        assert cancel.json()["status"] in ("cancelling", "cancelled")
        wait_until(lambda: v1_snapshot(on_a, run_id)["status"] == "cancelled", what="A to read the cancellation")
        two = assert_same_run(on_a, on_b, run_id)
        assert two["status"] == "cancelled"
        types = [e["type"] for e in v2_events(on_b, bound)]
        assert types.index("interrupt.resolved") < types.index("run.cancelled") == len(types) - 1, types
        refused(on_b.post(f"/runs/{project(bound)}/cancel", json={}), 409, "run_terminal")
